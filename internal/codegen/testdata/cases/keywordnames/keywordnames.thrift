// What Apache's current compiler accepts and 0.17 did not: keywords as
// field names (THRIFT-5626), and an enum default written with another
// enum's prefix, which Apache reads in the field's own enum.
namespace go keywordnames

enum MyEnum1 {
  ME1_0 = 0,
  ME1_1 = 1,
}

enum MyEnum2 {
  ME2_0 = 0,
  ME2_1 = 1,
  ME2_2 = 2,
}

// Apache's test/v0.16/NameConflictTest.thrift's Thrift5626 and more: a
// field whose Go name would be a generated method (String, an exception's
// Error) gets a `_` suffix, as Facebook's Go generator does.
struct Thrift5626 {
   1: i8       i8
   2: i16      i16
   3: i32      i32
   4: i64      i64
   5: uuid     uuid
   6: string   string
   7: binary   binary
   8: bool     bool
   9: byte     byte
  10: list<string>        list
  11: set<string>         set
  12: map<string,string>  map
  13: double   double
  14: i32      required
  15: optional i32 optional
  16: i32      service
  17: i32      include
}

struct WrongPrefix {
  1: MyEnum2 x = MyEnum1.ME2_2
  2: list<MyEnum2> xs = [MyEnum1.ME2_1, MyEnum2.ME2_0]
}

exception Failed {
  1: string error
  2: string string
}

const Thrift5626 WITH_STRING = {"string": "s", "i8": 1}

const MyEnum2 DEFAULT_X = MyEnum1.ME2_1

service Keywords {
  i64 sum(1: i32 i32, 2: i64 i64, 3: list<i32> list),
  binary echo(1: binary binary, 2: map<string,string> map),
  string str(1: string string, 2: i32 error) throws (1: Failed failed),
}
