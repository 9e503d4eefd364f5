// The ATB echo service on Apache Thrift C++ 0.17, framed binary protocol,
// as TThreadedServer (a thread per connection) or TNonblockingServer
// (libevent I/O threads, one per CPU, running the handler themselves: a
// worker pool would add a hand-off per call). The Go harness starts it as
//
//	atb-apache-cpp-server -server threaded|nonblocking -addr 127.0.0.1:0
//
// It prints "ADDR <host:port>" once listening and exits when stdin reaches
// EOF, so it never outlives the harness process that started it.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <thread>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/server/TNonblockingServer.h>
#include <thrift/server/TThreadedServer.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TNonblockingServerSocket.h>
#include <thrift/transport/TServerSocket.h>

#include "common.h"
#include "gen-cpp/Echo.h"

using namespace apache::thrift;

class EchoHandler : public EchoIf {
 public:
  void echo(std::string& ret, const std::string& payload) override { ret = payload; }
};

// AddrPrinter says where the server listens once serve() has bound the
// socket (port 0 picks one).
class AddrPrinter : public server::TServerEventHandler {
 public:
  AddrPrinter(std::string host, std::function<int()> port) : host_(std::move(host)), port_(std::move(port)) {}
  void preServe() override {
    std::printf("ADDR %s:%d\n", host_.c_str(), port_());
    std::fflush(stdout);
  }

 private:
  std::string host_;
  std::function<int()> port_;
};

// exitAtEOF ends the process when the harness closes stdin (or dies).
static void exitAtEOF() {
  std::thread([] {
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
    std::fflush(stdout);
    _exit(0);
  }).detach();
}

int main(int argc, char** argv) {
  Args args(argc, argv);
  std::string kind = args.str("server", "threaded"), host;
  int port = 0;
  splitAddr(args.str("addr", "127.0.0.1:0"), host, port);
  auto processor = std::make_shared<EchoProcessor>(std::make_shared<EchoHandler>());
  auto proto = std::make_shared<protocol::TBinaryProtocolFactory>();
  exitAtEOF();
  // Thrift logs every server start and client disconnect on stderr, which
  // would interleave with the harness's progress lines.
  GlobalOutput.setOutputFunction([](const char*) {});
  try {
    if (kind == "threaded") {
      auto sock = std::make_shared<transport::TServerSocket>(host, port);
      server::TThreadedServer srv(processor, sock, std::make_shared<BudgetFramedTransportFactory>(), proto);
      srv.setServerEventHandler(std::make_shared<AddrPrinter>(host, [sock] { return sock->getPort(); }));
      srv.serve();
    } else if (kind == "nonblocking") {
      auto sock = std::make_shared<transport::TNonblockingServerSocket>(host, port);
      server::TNonblockingServer srv(processor, proto, sock);
      unsigned n = std::thread::hardware_concurrency();
      srv.setNumIOThreads(n > 0 ? n : 1);
      srv.setServerEventHandler(std::make_shared<AddrPrinter>(host, [sock] { return sock->getListenPort(); }));
      srv.serve();
    } else {
      Args::die("-server " + kind + ": want threaded or nonblocking");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "atb-apache-cpp-server: %s\n", e.what());
    return 1;
  }
  return 0;
}
