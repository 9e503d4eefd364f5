package fastpath

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables that set the RDMA device and GID for programs that
// cannot pass an option; an option or flag wins over them.
const (
	EnvRDMADevice = "HATRPC_RDMA_DEVICE"
	EnvRDMAGID    = "HATRPC_RDMA_GID"
)

// ErrBadRDMASpec matches (errors.Is) a device or GID override that does not
// parse; ErrNoRDMAChoice one that names a device, port or GID the host lacks,
// or an address no RDMA device carries.
var (
	ErrBadRDMASpec  = errors.New("fastpath: bad rdma override")
	ErrNoRDMAChoice = errors.New("fastpath: no rdma device/port/gid")
)

// GIDMode is how a GID is chosen on the port.
type GIDMode uint8

// The GID modes: auto (the address's GID, RoCE v2 first), v2 (RoCE v2
// only), index (the one given).
const (
	GIDAuto GIDMode = iota
	GIDv2
	GIDIndex
)

// RDMASpec is an explicit device/port/GID override: the one spelling of
// server.WithRDMADevice/WithRDMAGID, the client's options, hatkv's
// --rdma-device/--rdma-gid and HATRPC_RDMA_DEVICE/HATRPC_RDMA_GID.
// The zero value chooses everything from the address.
type RDMASpec struct {
	Device string // "" any
	Port   int    // 0 any
	GID    GIDMode
	Index  int // with GIDIndex
}

// ParseRDMADevice reads "NAME" or "NAME:PORT" ("" is none).
func ParseRDMADevice(s string) (name string, port int, err error) {
	if s == "" {
		return "", 0, nil
	}
	name, ps, hasPort := strings.Cut(s, ":")
	if name == "" || strings.ContainsAny(name, "/ \t") {
		return "", 0, fmt.Errorf("%w: device %q: want NAME or NAME:PORT (e.g. mlx5_1:1)", ErrBadRDMASpec, s)
	}
	if hasPort {
		p, perr := strconv.Atoi(ps)
		if perr != nil || p < 1 || p > 255 {
			return "", 0, fmt.Errorf("%w: device %q: port %q is not 1..255", ErrBadRDMASpec, s, ps)
		}
		port = p
	}
	return name, port, nil
}

// ParseRDMAGID reads "auto" (or ""), "v2", or a GID table index.
func ParseRDMAGID(s string) (GIDMode, int, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return GIDAuto, 0, nil
	case "v2":
		return GIDv2, 0, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i > 1<<16 {
		return 0, 0, fmt.Errorf("%w: gid %q: want auto, v2 or a GID index", ErrBadRDMASpec, s)
	}
	return GIDIndex, i, nil
}

// ParseRDMASpec reads a device and a GID spelling into one RDMASpec.
func ParseRDMASpec(device, gid string) (RDMASpec, error) {
	var sp RDMASpec
	var err error
	if sp.Device, sp.Port, err = ParseRDMADevice(device); err != nil {
		return RDMASpec{}, err
	}
	if sp.GID, sp.Index, err = ParseRDMAGID(gid); err != nil {
		return RDMASpec{}, err
	}
	return sp, nil
}

// RDMASpecFromEnv fills what the options left empty from
// HATRPC_RDMA_DEVICE and HATRPC_RDMA_GID.
func RDMASpecFromEnv(device, gid string) (RDMASpec, error) {
	if device == "" {
		device = os.Getenv(EnvRDMADevice)
	}
	if gid == "" {
		gid = os.Getenv(EnvRDMAGID)
	}
	return ParseRDMASpec(device, gid)
}

// String is the spec in its spelling ("" parts left out).
func (sp RDMASpec) String() string {
	var b strings.Builder
	if sp.Device != "" {
		b.WriteString(sp.Device)
		if sp.Port > 0 {
			fmt.Fprintf(&b, ":%d", sp.Port)
		}
	}
	switch sp.GID {
	case GIDv2:
		b.WriteString(" gid=v2")
	case GIDIndex:
		fmt.Fprintf(&b, " gid=%d", sp.Index)
	}
	return strings.TrimSpace(b.String())
}
