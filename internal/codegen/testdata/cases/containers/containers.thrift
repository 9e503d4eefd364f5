namespace go containers

struct Item {
  1: string name,
  2: i32 count,
}

struct Containers {
  1: list<i32> ints,
  2: set<string> names,
  3: map<string, i64> counts,
  4: list<Item> items,
  5: set<Item> item_set,
  6: map<i32, Item> by_id,
  7: list<list<i32>> matrix,
  8: map<string, list<map<i32, set<string>>>> deep,
  9: set<binary> blobs,
  10: map<binary, i32> by_blob,
  11: list<bool> flags,
  12: map<double, uuid> by_double,
  13: optional list<Item> maybe_items,
  14: list<map<string, Item>> item_maps,
}
