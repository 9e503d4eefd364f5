package wiretest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// ApacheHTTPClient is Apache's Go THttpClient with a standard client on it.
type ApacheHTTPClient struct {
	HTTP   *thrift.THttpClient
	Client *thrift.TStandardClient
}

// DialApacheHTTP makes an Apache THttpClient posting to url, binary or
// compact, over hc (nil: a client whose requests time out after 30s, so
// a test never hangs).
func DialApacheHTTP(url string, compact bool, hc *http.Client) (*ApacheHTTPClient, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	tr, err := thrift.NewTHttpClientWithOptions(url, thrift.THttpClientOptions{Client: hc})
	if err != nil {
		return nil, err
	}
	var pf thrift.TProtocolFactory = thrift.NewTBinaryProtocolFactoryConf(nil)
	if compact {
		pf = thrift.NewTCompactProtocolFactoryConf(nil)
	}
	return &ApacheHTTPClient{HTTP: tr.(*thrift.THttpClient),
		Client: thrift.NewTStandardClient(pf.GetProtocol(tr), pf.GetProtocol(tr))}, nil
}

// Echo calls echo(msg).
func (c *ApacheHTTPClient) Echo(ctx context.Context, msg string) (string, error) {
	var res ApacheEchoResult
	if _, err := c.Client.Call(ctx, "echo", &ApacheEchoArgs{Msg: msg}, &res); err != nil {
		return "", err
	}
	if res.Success == nil {
		return "", fmt.Errorf("echo: no success field")
	}
	return *res.Success, nil
}

// Fire calls the oneway fire(msg).
func (c *ApacheHTTPClient) Fire(ctx context.Context, msg string) error {
	_, err := c.Client.Call(ctx, "fire", &ApacheEchoArgs{Msg: msg}, nil)
	return err
}

// ApacheHTTPHandler is Apache's Thrift-over-HTTP handler serving proc,
// binary or compact.
func ApacheHTTPHandler(proc thrift.TProcessor, compact bool) http.HandlerFunc {
	var pf thrift.TProtocolFactory = thrift.NewTBinaryProtocolFactoryConf(nil)
	if compact {
		pf = thrift.NewTCompactProtocolFactoryConf(nil)
	}
	return thrift.NewThriftHandlerFunc(proc, pf, pf)
}
