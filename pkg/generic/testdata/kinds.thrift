// Every kind of value the generic JSON mapping covers; shared.thrift
// checks that included types resolve.
include "shared.thrift"

namespace go kinds

typedef i64 Millis

enum Level {
  LOW = 1,
  HIGH = 10,
}

struct Point {
  1: i32 x,
  2: i32 y,
}

union Choice {
  1: string name,
  2: i32 number,
}

struct Node {
  1: string label,
  2: list<Node> kids,
}

struct Item {
  1: required string name,
  2: optional i16 count,
}

struct Everything {
  1: uuid id,
  2: Millis at,
  3: Level level,
  4: map<Point, string> byPoint,
  5: map<Level, i8> byLevel,
  6: map<i64, bool> byNumber,
  7: Choice choice,
  8: Node tree,
  9: list<Item> items,
  10: shared.Tag tag,
  11: set<binary> blobs,
  12: double ratio,
  13: map<binary, string> byBlob,
}

service Kinds extends shared.Base {
  Everything echo(1: Everything v),
  void put(1: Item item, 2: i8 small) throws (1: shared.Oops oops),
}
