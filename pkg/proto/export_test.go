package proto

import "math"

// Test access to the transcoders (every string as text one way, base64
// kept as text the other) and the string quoting.

func BinaryToJSON(bin []byte, message bool, lim *Limits) ([]byte, error) {
	x := b2j{src: bin, lim: limitsOrDefault(lim), max: math.MaxInt}
	var err error
	if message {
		err = x.message()
	} else {
		err = x.value(STRUCT, false)
	}
	return x.out, err
}

func JSONToBinary(js []byte, message bool, lim *Limits) ([]byte, error) {
	x := j2b{in: js, lim: limitsOrDefault(lim)}
	var err error
	if message {
		err = x.message()
	} else {
		err = x.value(STRUCT)
	}
	return x.out, err
}

func AppendJSONString(b, s []byte) []byte { return appendJSONString(b, s) }
