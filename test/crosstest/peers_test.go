package crosstest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerRows are stacks Apache's libraries speak and HatRPC does not yet:
// TJSONProtocol, THeader inside the framed transport, TZlibTransport, HTTP,
// unix sockets (Python's suite only, as in Apache's matrix). They
// run Apache against Apache here (Go client to Go server, Python client to
// Python server) so the peers of the harness are known to work when a row
// moves to matrix, once HatRPC speaks it.
var peerRows = []row{
	{[]string{"json", "multij"}, []string{"buffered", "framed"}, []string{"ip"}, allPeers},
	{[]string{"header", "multih"}, []string{"framed"}, []string{"ip"}, allPeers},
	{[]string{"binary", "compact", "json"}, []string{"zlib"}, []string{"ip"}, allPeers},
	{[]string{"binary", "compact", "multi"}, []string{"http"}, []string{"ip"}, allPeers},
	{[]string{"binary", "compact"}, []string{"http"}, []string{"ip-ssl"}, []peer{goClient, goServer}},
	{[]string{"binary", "multic"}, []string{"buffered", "framed"}, []string{"domain"}, pythonPeers},
}

func peerCells(p peer) []cell {
	saved := matrix
	defer func() { matrix = saved }()
	matrix = peerRows
	return cellsFor(p)
}

// TestApachePeersAgree: Apache's Go client and server, and the Python
// scripts on Apache's Python library, agree with each other on every stack
// of peerRows.
func TestApachePeersAgree(t *testing.T) {
	k := makeKeys(t)
	t.Run("go", func(t *testing.T) {
		for _, c := range peerCells(goServer) {
			t.Run(c.name(), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), cellTimeout)
				defer cancel()
				s := c.hatStack()
				tc, sc := dialApache(t, startApacheServer(t, s, k.cert), s)
				n, err := apacheChecks(ctx, tc, sc)
				require.NoError(t, err)
				assert.Equal(t, apacheGoChecks(s.Multiplexed()), n)
			})
		}
	})
	t.Run("python", func(t *testing.T) {
		gen := genPython(t)
		cells := peerCells(pyServer)
		args := []string{pyScript("crossserver.py"), gen, k.pyfile}
		for _, c := range cells {
			args = append(args, pyServerCell(t, c))
		}
		ports := startPythonServers(t, args, len(cells))
		runPythonCells(t, gen, cells, func(c cell) string {
			require.Contains(t, ports, c.name())
			return ports[c.name()]
		})
	})
	assert.False(t, slices.ContainsFunc(peerCells(goServer), func(c cell) bool {
		return slices.Contains(cellsFor(goServer), c)
	}), "a stack in matrix needs no Apache-only run")
}
