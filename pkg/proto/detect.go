package proto

import "encoding/binary"

// DetectBytes is the most Detect ever needs to see.
const DetectBytes = 8

// Detect tells which protocol and framing a peer speaks from the first bytes
// it sent. It needs at most DetectBytes bytes; with fewer it may return
// ErrTruncated, meaning "read more and ask again". Unrecognised input yields
// ErrBadProtocol.
//
// Recognised openings:
//
//	80 01 .. ..            strict binary, unframed
//	82 (v&0x1f==1)         compact, unframed
//	LL LL LL LL 80 01      strict binary, framed
//	LL LL LL LL 82 ..      compact, framed
//	LL LL LL LL NN NN NN NN non-strict binary, framed (0 < N < L)
//	NN NN NN NN c..        non-strict binary, unframed (c: name characters)
//
// Non-strict unframed and framed differ in what follows the first i32: a
// name character (printable ASCII) versus a protocol byte or an i32 whose top
// byte is 0 (a control character, never part of a method name).
func Detect(first []byte) (p Protocol, framed bool, err error) {
	if len(first) == 0 {
		return 0, false, ErrTruncated
	}
	switch first[0] {
	case 0x80:
		if len(first) < 2 {
			return 0, false, ErrTruncated
		}
		if first[1] == 0x01 {
			return Binary, false, nil
		}
		return 0, false, ErrBadProtocol
	case compactProtocolID:
		if len(first) < 2 {
			return 0, false, ErrTruncated
		}
		if first[1]&compactVersionMsk == compactVersion {
			return Compact, false, nil
		}
		return 0, false, ErrBadProtocol
	}
	if first[0]&0x80 != 0 {
		return 0, false, ErrBadProtocol
	}
	if len(first) < 5 {
		return 0, false, ErrTruncated
	}
	l := int32(binary.BigEndian.Uint32(first))
	// Frame lengths and method name lengths are both far below 2^31; the
	// bound rejects text protocols such as HTTP ("GET " is 0x47455420).
	if l <= 0 || int64(l) > int64(DefaultLimits.MaxMessageSize) {
		return 0, false, ErrBadProtocol
	}
	switch b := first[4]; {
	case b == compactProtocolID:
		if len(first) < 6 {
			return 0, false, ErrTruncated
		}
		if first[5]&compactVersionMsk == compactVersion {
			return Compact, true, nil
		}
		return 0, false, ErrBadProtocol
	case b == 0x80:
		if len(first) < 6 {
			return 0, false, ErrTruncated
		}
		if first[5] == 0x01 {
			return Binary, true, nil
		}
		return 0, false, ErrBadProtocol
	case b == 0:
		// A frame holding a non-strict binary message: the i32 name length.
		if len(first) < 8 {
			return 0, false, ErrTruncated
		}
		n := int32(binary.BigEndian.Uint32(first[4:]))
		// name, type byte and seqid must fit in the frame
		if n >= 0 && int64(n)+9 <= int64(l) {
			return Binary, true, nil
		}
		return 0, false, ErrBadProtocol
	case b >= 0x20 && b < 0x7f && int64(l) <= int64(DefaultLimits.MaxStringLength):
		// Non-strict unframed: l was the method name length.
		return Binary, false, nil
	}
	return 0, false, ErrBadProtocol
}
