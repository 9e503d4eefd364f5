namespace go reserved

struct NewThing { 1: i32 v }
struct FooArgs { 1: i32 v }
struct BarResult { 1: i32 v }

struct Reserved {
  1: string type,
  2: i32 func,
  3: i32 NewField,
  4: i32 some_args,
  5: i32 user_id,
  6: string tx_name,
  7: string http_url,
  8: i32 chan,
  9: i32 error,
  10: i32 _under,
  11: i64 a_b_c,
  12: i32 go,
  13: i32 defer,
}

service range {
  i32 select(1: i32 type, 2: i32 ctx, 3: i32 _c, 4: i32 args, 5: string error),
  NewThing new_thing(1: FooArgs args),
  BarResult get_id(1: i32 id),
}
