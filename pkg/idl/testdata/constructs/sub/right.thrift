include "common.thrift"

struct Other {
  1: common.Common common
}
