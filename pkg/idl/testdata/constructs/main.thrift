#!/usr/local/bin/thrift --gen go
# Every construct of the Apache Thrift IDL plus HatRPC hints.
include "sub/left.thrift"
include 'sub/right.thrift'
include "extra.thrift"   // found through the -I directory
cpp_include "<unordered_map>"

namespace go hat.example
namespace py.twisted example.twisted
namespace * example
namespace xsd test (uri = 'http://example.org/ns')

/** Identifier of a user. */
typedef i64 UserId (go.type = "UserID")
typedef UserId AccountId
typedef list<Later> Laters // forward reference to a type declared below

const i32 INT_CONST = 42;
const i64 HEX_CONST = 0x7FFF,
const i16 NEG_HEX = -0x10
const double PI = 3.14159
const double EXP = 1e10
const double FROM_INT = 3
const string GREETING = "hello \"world\"\n"
const string SINGLE = 'it\'s'
const bool YES = true
const byte SMALL = -128
const i8 TINY = 127
const list<string> NAMES = ["a", "b"; "c"]
const set<i32> PRIMES = [2, 3, 5]
const map<string, i32> AGES = {"ann": 31, 'bob': 42,}
const map<Color, list<i32>> BY_COLOR = {Color.RED: [1], Color.GREEN: []}
const Color FAVORITE = Color.BLUE
const Color BARE = GREEN
const i32 ALIAS = INT_CONST
const i32 FROM_ENUM = Color.BLUE
const AccountId ACCOUNT = 7
const uuid ID = "00000000-0000-0000-0000-0000000000ff"
const Point ORIGIN = {"x": 0, "y": 0, "label": "origin"}
const string WITH_ANNOTATION = "x" (deprecated = "yes")
const left.Shared SHARED = {"id": left.LIMIT}

enum Color {
  RED,
  /** The green one. */
  GREEN = 5;
  BLUE
  BLACK = -1,
  WHITE
} (go.name = "Colour")

enum Empty {}

senum Planet { "mercury", "venus"; "earth" }

struct Point {
  1: required i32 x = 0,
  2: required i32 y;
  /** Optional label. */
  3: optional string label = "none" (go.tag = 'json:"label"')
  4: optional slist legacy
  5: byte b
  6: uuid u
  7: binary blob
  8: Later & later
  9: map<string (a = "1"), set<list<i16>>> (cpp.template = "std::map") nested
  10: list<string> cpp_type "std::vector<std::string>" vec xsd_optional xsd_nillable
}

union Choice {
  1: i32 number
  2: string text
}

exception Oops {
  1: i32 code
  2: string message
} (python.immutable = "")

struct Later {
  1: Color color = Color.RED
  2: Planet planet = "earth"
  3: left.Shared shared
  4: right.Other other
  5: extra.Extra extra
  6: AccountId account = ACCOUNT
}

/* A plain comment. */
service Base {
  void ping()
}

/**
 * Service documentation.
 */
service Calc extends Base {
  hint: perf_goal = latency, concurrency = 1;
  s_hint: payload = 4KiB, kv.sync = "on";
  c_hint: polling = busy;

  /** Adds. */
  i32 add(1: i32 a, 2: i32 b) [hint: payload = 512; c_hint: batch = 1.5],
  Point move(1: Point p, 2: required i32 dx) throws (1: Oops oops, 2: left.Failed failed) [s_hint: payload = 1MB],
  oneway void fire(1: string what);
  async void legacy_async()
  Color color() (deprecated) , [hint: goal = throughput]
  void none() [ ] ;
}

service Derived extends Calc {
  AccountId account(1: UserId user)
}

service Remote extends left.LeftService {}
