// Apache Thrift Benchmark (ATB) echo service, hint-free for Apache's own
// compiler. atb.thrift is the same service with HatRPC hints.
namespace go atb

service Echo {
  binary echo(1: binary payload),
}
