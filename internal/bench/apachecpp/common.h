// Shared by the ATB's Apache Thrift C++ server and client: argument parsing
// and the "host:port" form the Go harness passes addresses in.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <thrift/transport/TBufferTransports.h>

// Args holds "-name value" pairs; every flag takes a value.
struct Args {
  std::map<std::string, std::string> kv;

  Args(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
      if (argv[i][0] != '-' || i + 1 >= argc) {
        die("bad argument " + std::string(argv[i]) + ": want -name value pairs");
      }
      kv[argv[i] + 1] = argv[i + 1];
      i++;
    }
  }

  std::string str(const std::string& name, const std::string& def) const {
    auto it = kv.find(name);
    return it == kv.end() ? def : it->second;
  }

  long long num(const std::string& name, long long def) const {
    auto it = kv.find(name);
    if (it == kv.end()) return def;
    char* end = nullptr;
    long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0' || v < 0) {
      die("-" + name + " " + it->second + ": want a number >= 0");
    }
    return v;
  }

  [[noreturn]] static void die(const std::string& msg) {
    std::fprintf(stderr, "%s\n", msg.c_str());
    std::exit(2);
  }
};

// splitAddr splits "host:port".
inline void splitAddr(const std::string& addr, std::string& host, int& port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) Args::die("bad -addr " + addr + ": want host:port");
  host = addr.substr(0, colon);
  port = std::atoi(addr.c_str() + colon + 1);
}

// BudgetFramedTransport is a TFramedTransport whose read budget
// (TConfiguration's maxMessageSize, 100 MB) is restored after each message
// read. Thrift 0.17's C++ transports charge every byte read against it and
// restore it only in flush() (THRIFT-5371, fixed upstream in 2026): a
// client's one framed transport flushes every call, but a server reads
// through a transport of its own and writes through another, so the
// reading one never flushes and a TThreadedServer connection dies with
// "MaxMessageSize reached" (to its client: "No more data to read") after
// 100 MB, ~800 calls of 128 KiB, well within one throughput run.
// Restoring it is a counter store per call, what Apache's fix does per
// frame. (TNonblockingServer reads into buffers it resets itself.)
class BudgetFramedTransport : public apache::thrift::transport::TFramedTransport {
 public:
  using TFramedTransport::TFramedTransport;
  uint32_t readEnd() override {
    uint32_t n = TFramedTransport::readEnd();
    resetConsumedMessageSize();
    return n;
  }
};

class BudgetFramedTransportFactory : public apache::thrift::transport::TTransportFactory {
 public:
  std::shared_ptr<apache::thrift::transport::TTransport> getTransport(
      std::shared_ptr<apache::thrift::transport::TTransport> trans) override {
    return std::make_shared<BudgetFramedTransport>(trans);
  }
};
