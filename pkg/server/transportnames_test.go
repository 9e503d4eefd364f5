package server

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hatrpc/hatrpc/pkg/hints"
)

// TestTransportNames: the exported labels are the registry's names, each
// at its label index.
func TestTransportNames(t *testing.T) {
	assert.Equal(t, TransportTCP, transportNames[trTCP])
	assert.Equal(t, TransportThrift, transportNames[trThrift])
	assert.Equal(t, TransportSHM, transportNames[trOf(hints.TransportSHM)])
	assert.Equal(t, TransportRDMA, transportNames[trOf(hints.TransportRDMA)])
	assert.Equal(t, trTCP, trOf(hints.TransportTCP))
	for tr := range uint8(numTransports) {
		assert.Equal(t, tr == trTCP || tr == trThrift, eagerStats(tr), transportNames[tr])
	}
}
