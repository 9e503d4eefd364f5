package metadata

import "strings"

// ValidHTTPHeader tells whether a header can travel as an HTTP header
// (Thrift over HTTP): the key a token of RFC 9110 (no space, control
// character or separator), the value without control characters but tab.
func ValidHTTPHeader(key, value string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
