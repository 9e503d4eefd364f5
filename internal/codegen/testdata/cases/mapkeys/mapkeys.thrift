namespace go mapkeys

struct Key { 1: i32 a, 2: string b }

typedef list<i32> IntList

struct Keys {
  1: map<list<i32>, string> by_list,
  2: map<set<string>, i32> by_set,
  3: map<map<i32, i32>, bool> by_map,
  4: map<Key, Key> by_struct,
  5: list<map<IntList, map<Key, i32>>> nested,
  6: optional map<Key, string> maybe,
}

const map<list<i32>, string> LIST_KEYS = {[1, 2]: "a", [3]: "b"}

service KeyService {
  map<Key, string> lookup(1: map<list<i32>, i32> in),
}
