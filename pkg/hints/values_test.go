package hints

import (
	"encoding"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textValue is what every enum-like hint type implements.
type textValue interface {
	fmt.Stringer
	encoding.TextMarshaler
}

func TestEnumSpellings(t *testing.T) {
	tests := []struct {
		v    textValue
		want string
	}{
		{Latency, "latency"}, {Throughput, "throughput"}, {ResUtil, "res_util"},
		{PollAuto, "auto"}, {PollBusy, "busy"}, {PollEvent, "event"}, {PollAdaptive, "adaptive"},
		{ProtoAuto, "auto"}, {ProtoEager, "eager"}, {ProtoWriteRNDV, "write_rndv"}, {ProtoReadRNDV, "read_rndv"},
		{ProtoDirectWriteSend, "direct_write_send"}, {ProtoChainedWriteSend, "chained_write_send"},
		{ProtoDirectWriteIMM, "direct_write_imm"}, {ProtoRFP, "rfp"}, {ProtoHybrid, "hybrid"},
		{TransportAuto, "auto"}, {TransportRDMA, "rdma"}, {TransportSHM, "shm"}, {TransportTCP, "tcp"},
		{SwitchAuto, "auto"}, {SwitchOn, "on"}, {SwitchOff, "off"},
		{NUMANone, "none"}, {NUMANIC, "nic"}, {NUMANode(0), "0"}, {NUMANode(3), "3"},
		{BatchOff, "off"}, {BatchAuto, "auto"}, {Batch(8), "8"},
		{Under, "under"}, {Full, "full"}, {Over, "over"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T/%s", tt.v, tt.want), func(t *testing.T) {
			assert.Equal(t, tt.want, tt.v.String())
			b, err := tt.v.MarshalText()
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
		})
	}
}

func TestEnumTextRoundTrip(t *testing.T) {
	type all struct {
		G  Goal
		P  Polling
		Pr Protocol
		T  Transport
		S  Switch
		N  NUMA
		B  Batch
		Su Subscription
	}
	in := all{Throughput, PollEvent, ProtoDirectWriteIMM, TransportSHM, SwitchOff, NUMANode(1), Batch(16), Over}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"G":"throughput","P":"event","Pr":"direct_write_imm","T":"shm","S":"off","N":"1","B":"16","Su":"over"}`, string(b))
	var out all
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)
}

func TestEnumInvalid(t *testing.T) {
	bad := []textValue{Goal(7), Polling(-1), Protocol(99), Transport(4), Switch(3), NUMA(-2), Batch(-5), Subscription(3)}
	for _, v := range bad {
		_, err := v.MarshalText()
		require.ErrorIs(t, err, ErrBadValue, "%T", v)
		assert.Contains(t, v.String(), "(", "%T renders its number", v)
	}
	var g Goal
	require.ErrorIs(t, g.UnmarshalText([]byte("fast")), ErrBadValue)
	var s Subscription
	require.ErrorIs(t, s.UnmarshalText([]byte("half")), ErrBadValue)
}

func TestParseEnumsAcceptArtifactSpellings(t *testing.T) {
	protos := map[string]Protocol{
		"eager": ProtoEager, "EAGER": ProtoEager, "eager_sendrecv": ProtoEager,
		"direct_write_imm": ProtoDirectWriteIMM, "direct-write-imm": ProtoDirectWriteIMM,
		"write_rndv": ProtoWriteRNDV, "write-rndv": ProtoWriteRNDV, "read_rndv": ProtoReadRNDV,
		"direct_write_send": ProtoDirectWriteSend, "chained_write_send": ProtoChainedWriteSend,
		"rfp": ProtoRFP, "hybrid": ProtoHybrid, "hybrid_eager_rndv": ProtoHybrid, "auto": ProtoAuto,
	}
	for in, want := range protos {
		got, err := ParseProtocol(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	polls := map[string]Polling{"busy": PollBusy, "event": PollEvent, "adaptive": PollAdaptive, "auto": PollAuto}
	for in, want := range polls {
		got, err := ParsePolling(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := ParseProtocol("tcp")
	require.ErrorIs(t, err, ErrBadValue)
}

func TestParseNUMAAndBatch(t *testing.T) {
	numa := []struct {
		in   string
		want NUMA
		err  error
	}{
		{"none", NUMANone, nil}, {"nic", NUMANIC, nil}, {"0", NUMANode(0), nil}, {"1", NUMANode(1), nil},
		{"1023", NUMANode(1023), nil}, {"1024", 0, ErrRange}, {"-1", 0, ErrBadValue}, {"gpu", 0, ErrBadValue}, {"", 0, ErrBadValue},
	}
	for _, tt := range numa {
		got, err := ParseNUMA(tt.in)
		if tt.err != nil {
			require.ErrorIs(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	node, ok := NUMANode(2).Node()
	assert.True(t, ok)
	assert.Equal(t, 2, node)
	_, ok = NUMANIC.Node()
	assert.False(t, ok)

	batch := []struct {
		in   string
		want Batch
		err  error
	}{
		{"off", BatchOff, nil}, {"auto", BatchAuto, nil}, {"1", Batch(1), nil}, {"32", Batch(32), nil},
		{"0", 0, ErrRange}, {"-3", 0, ErrRange}, {"65537", 0, ErrRange}, {"lots", 0, ErrBadValue},
	}
	for _, tt := range batch {
		got, err := ParseBatch(tt.in)
		if tt.err != nil {
			require.ErrorIs(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}
