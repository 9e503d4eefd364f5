package hints

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docRow is one row of the Keys table in docs/hints.md.
type docRow struct {
	aliases                     []string
	typ, def, scope, side, text string
}

var backticked = regexp.MustCompile("`([^`]*)`")

func docKeyRows(t *testing.T) map[string]docRow {
	t.Helper()
	src, err := os.ReadFile("../../docs/hints.md")
	require.NoError(t, err)
	rows := map[string]docRow{}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		require.Len(t, cells, 8, "row %q", line)
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name := strings.Trim(cells[0], "`")
		var aliases []string
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			aliases = append(aliases, m[1])
		}
		_, dup := rows[name]
		require.False(t, dup, "key %s listed twice", name)
		rows[name] = docRow{aliases: aliases, typ: cells[2], def: strings.Trim(cells[4], "`"),
			scope: cells[5], side: cells[6], text: cells[7]}
	}
	return rows
}

// TestDocsListEveryKey keeps docs/hints.md and the schema table in sync.
func TestDocsListEveryKey(t *testing.T) {
	rows := docKeyRows(t)
	keys := Keys()
	require.Len(t, rows, len(keys), "docs/hints.md must list exactly the schema's keys")
	for _, k := range keys {
		t.Run(k.Name, func(t *testing.T) {
			row, ok := rows[k.Name]
			require.True(t, ok, "docs/hints.md does not list %s", k.Name)
			assert.Equal(t, k.Aliases, row.aliases)
			assert.Equal(t, k.Default, row.def)
			assert.Equal(t, k.Scope.String(), row.scope)
			assert.Equal(t, k.Side.String(), row.side)
			assert.True(t, strings.HasPrefix(row.typ, k.Type.String()), "type %q vs %s", row.typ, k.Type)
			for _, v := range k.Values {
				if !strings.HasPrefix(v, "<") {
					assert.Contains(t, row.text+" "+rowValues(t, k.Name), v)
				}
			}
			assert.NotEmpty(t, row.text)
		})
	}
}

// rowValues returns the Values cell of a key's row.
func rowValues(t *testing.T, name string) string {
	src, err := os.ReadFile("../../docs/hints.md")
	require.NoError(t, err)
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "| `"+name+"` |") {
			return strings.Split(line, "|")[4]
		}
	}
	return ""
}

func TestSchemaTable(t *testing.T) {
	for _, k := range Keys() {
		assert.NotEmpty(t, k.Doc, k.Name)
		assert.NotEmpty(t, k.Default, k.Name)
		assert.NotNil(t, k.apply, k.Name)
		assert.False(t, strings.Contains(k.Name, "."), "%s would look like an application key", k.Name)
		if k.Type == TypeEnum {
			assert.NotEmpty(t, k.Values, k.Name)
		}
		for _, n := range append([]string{k.Name}, k.Aliases...) {
			got, ok := LookupKey(n)
			require.True(t, ok, n)
			assert.Equal(t, k.Name, got.Name)
		}
	}
	_, ok := LookupKey("kv.sync")
	assert.False(t, ok)
	// Keys returns a copy: editing it cannot corrupt the schema.
	ks := Keys()
	ks[0].Name = "changed"
	assert.Equal(t, "perf_goal", Keys()[0].Name)
}

// TestSchemaDefaultsMatchPlan writes every documented default explicitly
// and checks the planner plans exactly as with the implicit default, so the
// table, the docs and the planner agree on what "default" means.
func TestSchemaDefaultsMatchPlan(t *testing.T) {
	for _, k := range Keys() {
		t.Run(k.Name, func(t *testing.T) {
			var s Set
			canon, err := k.apply(&s, k.Default)
			require.NoError(t, err, "the default must be writable as a value")
			assert.Equal(t, k.Default, canon)
			for _, cores := range []int{1, 8} {
				for _, size := range []int{0, 64, 4096, 1 << 20} {
					assert.Equal(t, planFor(Set{}, cores, size), planFor(s, cores, size), "cores %d size %d", cores, size)
				}
			}
		})
	}
}

func TestSideRuleAllows(t *testing.T) {
	assert.True(t, SideBoth.allows(SideClient))
	assert.True(t, SideBoth.allows(SideServer))
	assert.True(t, SideClientOnly.allows(SideClient))
	assert.False(t, SideClientOnly.allows(SideServer))
	assert.True(t, SideServerOnly.allows(SideServer))
	assert.False(t, SideServerOnly.allows(SideClient))
}

func TestAppKeyValid(t *testing.T) {
	for k, want := range map[string]bool{
		"kv.sync": true, "app.cache.size": true, "a._b": true, "x.y2": true,
		"sync": false, "kv.": false, ".sync": false, "kv..sync": false, "kv.2x": false, "kv.sy-nc": false, "": false,
	} {
		assert.Equal(t, want, appKeyValid(k), k)
	}
}
