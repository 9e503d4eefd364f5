namespace go fields

struct Sub { 1: i32 v = 3 }

struct Fields {
  1: required i32 req_int,
  2: optional i32 opt_int,
  3: optional i32 opt_def = 7,
  4: i32 def_int = 9,
  5: required string req_str,
  6: optional string opt_str,
  7: string def_str = "x",
  8: required Sub req_sub,
  9: optional Sub opt_sub,
  10: Sub def_sub,
  11: optional list<i32> opt_list,
  12: optional list<i32> opt_list_def = [1, 2],
  13: list<i32> list_def = [3],
  14: required list<string> req_list,
  15: optional Sub sub_def = {"v": 4},
  16: double ratio = 0.5,
  17: bool on = true,
  18: optional bool maybe_on = false,
  19: i32 zero_def = 0,
}
