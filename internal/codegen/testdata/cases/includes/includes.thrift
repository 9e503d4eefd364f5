namespace go app.core

include "shared.thrift"
include "plain.thrift"
include "star.thrift"
include "conflict.thrift"

struct Main {
  1: shared.SharedStruct s,
  2: shared.Mode mode = shared.Mode.OFF,
  3: shared.SharedList items,
  4: plain.PlainThing plain,
  5: star.StarThing star,
  6: map<shared.Mode, shared.SharedStruct> by_mode,
  7: conflict.ProtoThing pt,
}

const shared.SharedStruct DEFAULT_SHARED = {"key": 1, "value": "v"}

service Mains {
  shared.SharedStruct get(1: shared.Mode mode),
}
