package hs2

import (
	"fmt"
	"strings"

	"github.com/hatrpc/hatrpc/pkg/client"
	"github.com/hatrpc/hatrpc/pkg/server"
	"github.com/hatrpc/hatrpc/tpch/gen/hs2"
	"github.com/hatrpc/hatrpc/tpch/gen/hs2/hs2server"
	tcli "github.com/hatrpc/hatrpc/tpch/gen/tcliservice"
	"github.com/hatrpc/hatrpc/tpch/gen/tcliservice/tcliserviceserver"
)

// Config is one of the paper's three configurations of the service.
type Config int

const (
	// Vanilla is Apache Hive's TCLIService.thrift as it is: no hints.
	Vanilla Config = iota
	// Service plans every function from idl/hs2.thrift's service-level
	// hints only.
	Service
	// Function plans each function from its own hints in idl/hs2.thrift.
	Function
)

var configNames = [...]string{"vanilla", "service", "function"}

func (c Config) String() string {
	if int(c) < len(configNames) {
		return configNames[c]
	}
	return fmt.Sprintf("Config(%d)", int(c))
}

// ParseConfig reads "vanilla", "service" or "function".
func ParseConfig(s string) (Config, error) {
	for i, n := range configNames {
		if strings.EqualFold(s, n) {
			return Config(i), nil
		}
	}
	return 0, fmt.Errorf("hs2: unknown configuration %q: want vanilla, service or function", s)
}

// ServerOptions are the server options configuration c needs.
func (c Config) ServerOptions() []server.Option {
	if c == Service {
		return []server.Option{server.WithServiceLevelHints()}
	}
	return nil
}

// ClientOptions are the HatRPC client options configuration c needs.
func (c Config) ClientOptions() []client.Option {
	if c == Service {
		return []client.Option{client.WithServiceLevelHints()}
	}
	return nil
}

// Register binds h to srv as TCLIService, generated from the IDL of
// configuration c.
func Register(srv *server.Server, h *Handler, c Config) {
	if c == Vanilla {
		tcliserviceserver.RegisterTCLIService(srv, h)
		return
	}
	hs2server.RegisterTCLIService(srv, h)
}

// Client is the generated HatRPC client of configuration c; every
// configuration's client has the same methods.
func Client(cl client.Caller, c Config) tcli.TCLIServiceHandler {
	if c == Vanilla {
		return tcli.NewTCLIServiceClient(cl)
	}
	return hs2.NewTCLIServiceClient(cl)
}
