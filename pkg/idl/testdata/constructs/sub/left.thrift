include "common.thrift"
namespace go left

const i32 LIMIT = 10

struct Shared {
  1: i32 id
  2: common.Common common
}

exception Failed {
  1: string why
}

service LeftService {
  common.Common get(1: i32 id) throws (1: Failed f)
}
