// A generated package named like a runtime package: importers alias it.
namespace go lib.proto
struct ProtoThing { 1: i32 n }
