namespace go consts

enum Level { LOW = 1, HIGH = 2 }
typedef i32 Count
typedef Level LevelAlias

struct Limits {
  1: i32 max = 10,
  2: string name,
  3: optional i64 soft,
  4: list<string> tags,
}

const i8 TINY = -3
const i16 SMALL = 300
const i32 MAX_USERS = 1000
const i64 BIG = 9000000000
const double PI = 3.14159
const double WHOLE = 2
const bool ENABLED = true
const bool DISABLED = false
const string GREETING = "hello \"world\""
const binary MAGIC = "abc"
const uuid ZERO_ID = "00000000-0000-0000-0000-000000000001"
const Level DEFAULT_LEVEL = Level.HIGH
const LevelAlias ALIASED_LEVEL = Level.LOW
const Count COUNT = 7
const i32 COPY_OF_MAX = MAX_USERS
const list<i32> PRIMES = [2, 3, 5, 7]
const set<string> WORDS = ["a", "b"]
const map<string, i32> AGES = {"ann": 30, "bob": 40}
const map<Level, list<string>> BY_LEVEL = {Level.LOW: ["x"], Level.HIGH: []}
const Limits DEFAULT_LIMITS = {"max": 20, "name": "std", "soft": 5, "tags": ["t1"]}
const list<Limits> ALL_LIMITS = [{"max": 1}, {"name": "two"}]
