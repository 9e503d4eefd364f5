package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hatrpc/hatrpc/internal/hatkv/kvstore"
	"github.com/hatrpc/hatrpc/internal/hatkv/lmdb"
)

// errDamaged is check's error when it found damage.
var errDamaged = errors.New("the store is damaged")

func newCheckCmd() *cobra.Command {
	var (
		db  string
		max int
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check every page and record of a store without opening it with LMDB",
		Long: `Check reads data.mdb directly (never through LMDB, so damage cannot crash
it): the meta pages, that the file holds every page they reference, then
every page of every tree — headers, bounds, key order, depth, page and entry
counts, no page used twice — and decodes every record. It exits 0 when the
store is intact and 1 with the list of problems otherwise.

It only reads, but a server writing meanwhile makes the walk see two
snapshots (reported); to check a live store, back it up and check the copy:
  hatkv backup --db DIR COPY && hatkv check --db COPY`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := kvstore.Check(cmd.Context(), db, lmdb.WithMaxProblems(max))
			if err != nil {
				return err
			}
			printReport(cmd.OutOrStdout(), db, rep)
			switch {
			case rep.Changed:
				// Pages rewritten under the walk can look damaged.
				return fmt.Errorf("%s changed during the check (a server is writing), so it saw no single snapshot: check a backup instead", db)
			case len(rep.Problems) > 0:
				return fmt.Errorf("%w: %d problem(s) in %s; restore a backup (see hatkv backup --help)",
					errDamaged, len(rep.Problems)+rep.MoreProblems, db)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", defaultDB, "data directory")
	cmd.Flags().IntVar(&max, "max-problems", 100, "list at most this many problems")
	return cmd
}

func printReport(w io.Writer, db string, rep *lmdb.Report) {
	m := rep.Meta
	outf(w, "%s: data.mdb %d bytes, %d-byte pages, pages 0..%d in use by txn %d\n", db, m.FileSize, m.PageSize, m.LastPage, m.TxnID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	outf(tw, "tree\tentries\tdepth\tbranch\tleaf\toverflow\t\n")
	for _, t := range rep.Trees {
		outf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", t.Name, t.Entries, t.Want.Depth, t.BranchPages, t.LeafPages, t.OverflowPages)
	}
	_ = tw.Flush()
	outf(w, "free pages %d, unaccounted pages %d (left by a crash: wasted, not damage)\n", rep.FreePages, rep.Unaccounted)
	if rep.Changed {
		outf(w, "warning: a write was committed during the check; the problems below may come from pages rewritten under it\n")
	}
	for _, p := range rep.Problems {
		outf(w, "problem: %s\n", p)
	}
	if rep.MoreProblems > 0 {
		outf(w, "... and %d more problem(s)\n", rep.MoreProblems)
	}
	if rep.OK() {
		outf(w, "ok: no damage found\n")
	}
}

func newBackupCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "backup TARGET",
		Short: "Write a compacted, verified copy of the store into TARGET (also while a server runs)",
		Long: `Backup copies the store in --db into TARGET, which must be missing or empty,
with LMDB's compacting copy (mdb_env_copyfd2, MDB_CP_COMPACT) inside one read
transaction: the copy is one consistent snapshot even while a server writes
(LMDB lets several processes share an environment; the backup opens it
read-only). The copy is then checked like hatkv check. TARGET is a complete
data directory:

  serve it:   hatkv serve --db TARGET
  restore it: stop the server, then
              mv hatkv-data hatkv-data.damaged && mv TARGET hatkv-data
              and start the server again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := kvstore.Open(ctx, db, kvstore.WithReadOnly(), kvstore.WithVerify(kvstore.VerifyMeta))
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := st.Backup(ctx, args[0])
			if err != nil {
				return err
			}
			var records uint64
			for _, t := range rep.Trees {
				if t.Name == "hatkv.data" {
					records = t.Entries
				}
			}
			outf(cmd.OutOrStdout(), "backup of %s written to %s: %d records, %d bytes, verified\n",
				db, args[0], records, rep.Meta.FileSize)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", defaultDB, "data directory to back up")
	return cmd
}
