#!/usr/bin/env bash
# vm.sh - real kernel verbs without a NIC: boots Debian's kernel under QEMU,
# brings up Soft-RoCE (rdma_rxe) and runs one command in the guest.
#
#   test/rxe/vm.sh build                      fetch + cache kernel and initramfs
#   test/rxe/vm.sh run [opts] -- CMD ARGS...  boot, run CMD, power off
#
# The guest mounts the host's root read-only over virtio-9p with a tmpfs
# overlay and chroots into it, so every host binary and library (Go, rdma-core,
# the rxe provider) is there unchanged. The directory given by --share (default:
# a fresh temporary one, exported as HATRPC_RXE_SHARE) is mounted writable at
# the same path, so results come back. The exit status is CMD's.
#
# run options:
#   --dir D        working directory of CMD in the guest (default: cwd)
#   -e NAME=VALUE  environment for CMD (repeatable); HATRPC_PROVIDER=ibv is set
#   --share D      writable host directory seen at the same path in the guest
#   --timeout S    kill the VM after S seconds (default 1800); status 124
#   --idle S       kill the VM when its console has printed nothing for S
#                  seconds (default 0: off); status 124. A hang guard that
#                  assumes no speed: a loaded host makes the run longer,
#                  not silent, as long as the command prints its progress
#   --mem MB       guest memory (default 3072), --smp N (default 2)
#   --ip A         address of the rxe netdev (default 10.0.0.1/24)
#   --net SPEC     QEMU -netdev SPEC for a virtio-net link to another guest
#                  (two-node runs; the rxe device then sits on that link)
#   --net2 SPEC    a second virtio-net link (eth1, left unconfigured: the
#                  command sets its address and rxe1, as twonode.sh does)
#   --name N       label for log lines and the VM (default rxe)
#   --keep-log F   write the whole console (kernel included) to F
#
# Environment: HATRPC_RXE_CACHE (default ~/.cache/hatrpc-rxe), HATRPC_RXE_ACCEL
# (kvm or tcg; default: tcg, since a stock kernel hangs under this host's KVM).
set -euo pipefail

CACHE=${HATRPC_RXE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hatrpc-rxe}
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "rxe: $*" >&2; exit 2; }

need() {
	local missing=()
	for c in "$@"; do command -v "$c" >/dev/null || missing+=("$c"); done
	((${#missing[@]} == 0)) || die "missing commands: ${missing[*]} (make test-rdma installs them: see test/rxe/README.md)"
}

# Modules the guest loads, in order: virtio transport, 9p + overlay for the
# host root, then Soft-RoCE. crc32_generic is not in rdma_rxe's modules.dep
# but without it `rdma link add` fails with ENOENT (rxe's ICRC needs crc32).
MODS=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
	netfs fscache 9pnet 9pnet_virtio 9p overlay
	failover net_failover virtio_net dummy veth
	crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe)

build() {
	need apt-get apt-cache dpkg depmod modinfo cpio gzip busybox
	local pkg ver dir
	resolve() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
	pkg=$(resolve)
	if [[ -z $pkg ]]; then
		# A machine whose package lists were never fetched (or were cleaned).
		${SUDO:-$([[ $(id -u) == 0 ]] || echo sudo)} apt-get update -qq >/dev/null 2>&1 || true
		pkg=$(resolve)
	fi
	[[ -n $pkg ]] || die "cannot resolve linux-image-amd64 (apt-get update failed?)"
	ver=${pkg#linux-image-}
	# Keyed by the init script and module list too: a changed init rebuilds.
	dir=$CACHE/$ver-$( (cat "$here/init"; printf '%s\n' "${MODS[@]}") | sha256sum | cut -c1-12)
	if [[ -f $dir/initrd.img && -f $dir/vmlinuz ]]; then
		echo "$dir"
		return
	fi
	rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
	(cd "$dir.tmp" && apt-get download -q "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
	dpkg -x "$dir.tmp"/*.deb "$dir.tmp/root"
	depmod -b "$dir.tmp/root" "$ver"
	local ird=$dir.tmp/initrd m f
	mkdir -p "$ird"/{bin,dev,proc,sys,mnt,lib/modules}
	cp "$(command -v busybox)" "$ird/bin/busybox"
	for m in "${MODS[@]}"; do
		f=$(modinfo -b "$dir.tmp/root" -k "$ver" -n "$m") || die "module $m not in $pkg"
		cp "$f" "$ird/lib/modules/$m.ko"
	done
	printf '%s\n' "${MODS[@]}" >"$ird/lib/modules/order"
	cp "$here/init" "$ird/init"
	chmod 755 "$ird/init"
	(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir.tmp/initrd.img"
	cp "$dir.tmp/root/boot/vmlinuz-$ver" "$dir.tmp/vmlinuz"
	rm -rf "$dir.tmp/root" "$ird" "$dir.tmp"/*.deb
	rm -rf "$dir" && mv "$dir.tmp" "$dir"
	echo "$dir"
}

run() {
	local wd=$PWD share="" timeout=1800 idle=0 mem=3072 smp=2 ip=10.0.0.1/24 net="" net2="" name=rxe keeplog=""
	local envs=("HATRPC_PROVIDER=ibv")
	while (($#)); do
		case $1 in
		--dir) wd=$(cd "$2" && pwd); shift 2 ;;
		-e) envs+=("$2"); shift 2 ;;
		--share) share=$2; shift 2 ;;
		--timeout) timeout=$2; shift 2 ;;
		--idle) idle=$2; shift 2 ;;
		--mem) mem=$2; shift 2 ;;
		--smp) smp=$2; shift 2 ;;
		--ip) ip=$2; shift 2 ;;
		--net) net=$2; shift 2 ;;
		--net2) net2=$2; shift 2 ;;
		--name) name=$2; shift 2 ;;
		--keep-log) keeplog=$2; shift 2 ;;
		--) shift; break ;;
		*) die "unknown option $1" ;;
		esac
	done
	(($#)) || die "run: no command"
	need qemu-system-x86_64 timeout
	local dir
	dir=$(build | tail -1)
	local job
	job=$(mktemp -d "${TMPDIR:-/tmp}/hatrpc-rxe.XXXXXX")
	[[ -n $share ]] || share=$job/share
	mkdir -p "$share"
	share=$(cd "$share" && pwd)
	envs+=("HATRPC_RXE_SHARE=$share")
	# conf is read by the guest's busybox init (plain assignments); cmd.sh runs
	# under the host's bash inside the guest's view of the host root.
	{
		printf 'JOB_SHARE=%q\n' "$share"
		printf 'JOB_IP=%q\n' "$ip"
		printf 'JOB_NET=%q\n' "$([[ -n $net ]] && echo virtio || echo dummy)"
	} >"$job/conf"
	{
		echo 'set -e'
		printf 'cd %q\n' "$wd"
		printf 'export PATH=%q HOME=%q\n' "$PATH" "$HOME"
		for e in "${envs[@]}"; do printf 'export %q\n' "$e"; done
		echo 'ulimit -l unlimited; ulimit -n 65536'
		echo 'set +e'
		printf '%q ' "$@"
		echo
	} >"$job/cmd.sh"
	local accel=${HATRPC_RXE_ACCEL:-tcg}
	local args=(-name "$name" -nographic -no-reboot -m "$mem" -smp "$smp"
		-kernel "$dir/vmlinuz" -initrd "$dir/initrd.img"
		-append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off"
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
		-virtfs "local,path=$job,mount_tag=job,security_model=none"
		-virtfs "local,path=$share,mount_tag=share,security_model=none")
	if [[ $accel == kvm ]]; then
		args+=(-enable-kvm -cpu host)
	else
		args+=(-accel tcg,thread=multi -cpu max)
	fi
	if [[ -n $net ]]; then
		# A MAC of its own per guest (from the address's last byte): QEMU
		# gives every guest the same default one.
		local last=${ip%%/*}
		last=${last##*.}
		args+=(-netdev "$net,id=n0" -device "virtio-net-pci,netdev=n0,mac=$(printf '52:54:00:72:78:%02x' "$last")")
		if [[ -n $net2 ]]; then
			args+=(-netdev "$net2,id=n1" -device "virtio-net-pci,netdev=n1,mac=$(printf '52:54:00:72:79:%02x' "$last")")
		fi
	else
		args+=(-nic none)
	fi
	local t0=$SECONDS rc watchdog=""
	: >"$job/console"
	if ((idle > 0)); then
		# The console file's mtime is the guest's last line; qemu is found
		# by its job directory, which no other VM shares.
		(
			while sleep 15; do
				if (($(date +%s) - $(stat -c %Y "$job/console") > idle)); then
					: >"$job/idled"
					pkill -TERM -f -- "path=$job,mount_tag=job" || true
					exit 0
				fi
			done
		) &
		watchdog=$!
	fi
	set +e
	# setsid + timeout: the VM never outlives its budget or this script.
	timeout -k 10 "$timeout" qemu-system-x86_64 "${args[@]}" </dev/null 2>"$job/qemu.err" |
		stdbuf -oL tr -d '\r' | tee -a "$job/console" ${keeplog:+"$keeplog"} | sed -u -n '/^@@HATRPC-RXE-BEGIN@@$/,/^@@HATRPC-RXE-END/{/^@@HATRPC-RXE/d;p}'
	rc=${PIPESTATUS[0]}
	set -e
	if [[ -n $watchdog ]]; then
		kill "$watchdog" 2>/dev/null || true
		wait "$watchdog" 2>/dev/null || true
	fi
	if [[ -f $job/idled ]]; then
		rc=124
		echo "rxe[$name]: no console output for ${idle}s: killed" >&2
	elif ((rc == 124)); then
		echo "rxe[$name]: timed out after ${timeout}s" >&2
	elif [[ -f $job/rc ]]; then
		rc=$(cat "$job/rc")
	else
		echo "rxe[$name]: the guest did not report a status (qemu exit $rc):" >&2
		cat "$job/qemu.err" >&2
		[[ -f $job/init.log ]] && cat "$job/init.log" >&2
		rc=3
	fi
	echo "rxe[$name]: exit $rc after $((SECONDS - t0))s" >&2
	rm -rf "$job"
	return "$rc"
}

case ${1:-} in
build) shift; build "$@" ;;
run) shift; run "$@" ;;
*) die "usage: $0 build | run [opts] -- CMD..." ;;
esac
