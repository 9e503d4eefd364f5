// The per-connection order case of test/testutil/pokes.go, for Apache's
// Python client: the service, method and field names and ids are those of
// testutil.Pokes (oneway poke(1: i32 n), i32 pokes()).
namespace py pokes

service Pokes {
  oneway void poke(1: i32 n),
  i32 pokes(),
}
