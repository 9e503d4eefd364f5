namespace go same.pkg

include "other.thrift"

/** Both files land in one Go package, as with Apache's generator. */
struct Thing {
  1: other.OtherThing other,
  2: other.Alias alias,
  3: map<set<i32>, string> odd,
}

const other.OtherThing EMPTY_OTHER = {}
