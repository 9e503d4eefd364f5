// Shared by the ATB's Apache Thrift C++ server and client: argument parsing
// and the "host:port" form the Go harness passes addresses in.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

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
