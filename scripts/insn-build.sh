# Sourced by scripts/insn-ab.sh, scripts/insn-sides.sh and
# scripts/cpu-ab.sh: builds the internal/bench/insn driver.
#
#   insn_build DIR NAME [REV] [native]   -> DIR/insn-NAME, sources in DIR/src-NAME
#
# REV empty: the work tree as it is; else that revision (a worktree the
# caller removes). Unless native, the build is patched for a callgrind
# count: under callgrind every call looks slow, so the server's
# inline-call limits (quickCall, inlineBudget) are raised 1000x, as a
# native run would run the calls.
insn_build() {
	local tmp=$1 name=$2 rev=${3:-} native=${4:-} dir=$1/src-$2
	if [[ -z $rev ]]; then
		mkdir -p "$dir"
		git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$dir"
	else
		git worktree add -q --detach "$dir" "$rev"
		# An older revision may predate the driver: use this one's.
		mkdir -p "$dir/internal/bench/insn"
		cp internal/bench/insn/main.go "$dir/internal/bench/insn/"
	fi
	[[ -n $native ]] || insn_patch "$name" "$dir"
	(cd "$dir" && go build -o "$tmp/insn-$name" ./internal/bench/insn)
}

insn_patch() { # name dir
	local name=$1 dir=$2
	sed -i 's/^const quickCall = 20 \* time.Microsecond/const quickCall = 20 * time.Millisecond/; s/^const inlineBudget = 50 \* time.Microsecond/const inlineBudget = 50 * time.Millisecond/' "$dir/pkg/server/conn.go"
	grep -q '^const quickCall = 20 \* time.Millisecond' "$dir/pkg/server/conn.go" || { echo "insn: $name: quickCall not found to patch" >&2; exit 1; }
}
