// The ATB's closed-loop client on Apache Thrift C++ 0.17: one EchoClient
// and connection (TSocket, framed, binary) per caller, as the Go systems'
// callers, measuring what bench.RunClient measures and printing it as the
// JSON of bench.ClientResult's latency or throughput member:
//
//	atb-apache-cpp-client -addr H:P -size N -warmup W -warmup-ns T -calls K
//	atb-apache-cpp-client -addr H:P -size N -callers C -duration-ns D [-server-pid P]
//
// A latency run (no -callers) makes W unrecorded calls for at least T ns,
// then K recorded ones. A throughput run warms up for D/10, then counts the
// calls that complete in the next D ns and samples this process's and the
// server's CPU time at the window's edges, as the Go harness does.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "common.h"
#include "gen-cpp/Echo.h"

using namespace apache::thrift;
using Clock = std::chrono::steady_clock;

static long long nowNS() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// payload is bench.Payload(n): byte(i*31 + 7).
static std::string payload(size_t n) {
  std::string p(n, '\0');
  for (size_t i = 0; i < n; i++) p[i] = static_cast<char>(i * 31 + 7);
  return p;
}

// Caller is one connection and its client.
struct Caller {
  std::shared_ptr<transport::TTransport> trans;
  std::unique_ptr<EchoClient> client;
  std::string rep;

  Caller(const std::string& host, int port) {
    auto sock = std::make_shared<transport::TSocket>(host, port);
    sock->setNoDelay(true);
    // One framed transport reads and writes, so each call's flush restores
    // its read budget (see BudgetFramedTransport).
    trans = std::make_shared<transport::TFramedTransport>(sock);
    client = std::make_unique<EchoClient>(std::make_shared<protocol::TBinaryProtocol>(trans));
    trans->open();
  }

  // call makes one echo and checks the reply as bench.checkEcho does:
  // length and both ends.
  void call(const std::string& req) {
    client->echo(rep, req);
    if (rep.size() != req.size() || (!req.empty() && (rep.front() != req.front() || rep.back() != req.back()))) {
      std::ostringstream msg;
      msg << "echo reply differs from request: sent " << req.size() << " bytes, got " << rep.size();
      throw std::runtime_error(msg.str());
    }
  }
};

// quantile is the smallest sample with at least q of the samples at or
// below it (HdrHistogram's ValueAtQuantile, without its bucketing).
static long long quantile(std::vector<long long>& v, double q) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(q * v.size() + 0.5);
  k = std::min(std::max<size_t>(k, 1), v.size()) - 1;
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

static long long selfCPU() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

// procCPU is utime+stime of pid from /proc/<pid>/stat, fields 14 and 15
// counted from the last ')' (the command name may hold spaces); -1 when
// unreadable.
static long long procCPU(long long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(s.substr(close + 1));
  std::string field;
  long long ut = -1, st = -1;
  for (int i = 3; i <= 15 && in >> field; i++) {
    if (i == 14) ut = std::atoll(field.c_str());
    if (i == 15) st = std::atoll(field.c_str());
  }
  if (ut < 0 || st < 0) return -1;
  return (ut + st) * (1000000000LL / sysconf(_SC_CLK_TCK));
}

static int latency(const std::string& host, int port, const std::string& req, const Args& a) {
  Caller c(host, port);
  long long warmup = a.num("warmup", 0), warmupNS = a.num("warmup-ns", 0), calls = a.num("calls", 0);
  if (calls < 1) Args::die("-calls: a latency run needs at least one recorded call");
  for (long long end = nowNS() + warmupNS; nowNS() < end;) c.call(req);
  for (long long i = 0; i < warmup; i++) c.call(req);
  std::vector<long long> lat;
  lat.reserve(calls);
  long long sum = 0;
  for (long long i = 0; i < calls; i++) {
    long long t0 = nowNS();
    c.call(req);
    long long d = nowNS() - t0;
    lat.push_back(d);
    sum += d;
  }
  long long mean = sum / calls;
  long long p50 = quantile(lat, 0.50), p99 = quantile(lat, 0.99), p999 = quantile(lat, 0.999);
  std::printf("{\"latency\":{\"calls\":%lld,\"p50_ns\":%lld,\"p99_ns\":%lld,\"p999_ns\":%lld,\"mean_ns\":%lld}}\n", calls,
              p50, p99, p999, mean);
  return 0;
}

static int throughput(const std::string& host, int port, const std::string& req, const Args& a) {
  long long n = a.num("callers", 1), dur = a.num("duration-ns", 0), serverPID = a.num("server-pid", 0);
  if (dur < 1) Args::die("-duration-ns: want a positive duration");
  std::vector<std::unique_ptr<Caller>> callers;
  for (long long i = 0; i < n; i++) callers.push_back(std::make_unique<Caller>(host, port));
  std::atomic<bool> measured{false}, stop{false};
  std::atomic<long long> count{0};
  std::vector<std::vector<long long>> lats(n);
  std::vector<std::string> errs(n);
  std::vector<std::thread> threads;
  for (long long i = 0; i < n; i++) {
    threads.emplace_back([&, i] {
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          long long t0 = nowNS();
          callers[i]->call(req);
          if (measured.load(std::memory_order_relaxed)) {
            lats[i].push_back(nowNS() - t0);
            count.fetch_add(1, std::memory_order_relaxed);
          }
        }
      } catch (const std::exception& e) {
        errs[i] = e.what();
        stop = true;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(dur / 10));
  long long c0 = selfCPU(), s0 = serverPID > 0 ? procCPU(serverPID) : -1;
  long long t0 = nowNS();
  measured = true;
  std::this_thread::sleep_for(std::chrono::nanoseconds(dur));
  measured = false;
  long long calls = count.load();
  long long elapsed = nowNS() - t0;
  long long c1 = selfCPU(), s1 = serverPID > 0 ? procCPU(serverPID) : -1;
  stop = true;
  for (auto& t : threads) t.join();
  for (auto& e : errs) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  std::vector<long long> all;
  for (auto& l : lats) all.insert(all.end(), l.begin(), l.end());
  long long serverCPU = s0 >= 0 && s1 >= 0 ? s1 - s0 : 0;
  std::printf("{\"throughput\":{\"callers\":%lld,\"calls\":%lld,\"elapsed_ns\":%lld,\"p50_ns\":%lld,\"p99_ns\":%lld,"
              "\"client_cpu_ns\":%lld,\"server_cpu_ns\":%lld}}\n",
              n, calls, elapsed, quantile(all, 0.50), quantile(all, 0.99), c1 - c0, serverCPU);
  return 0;
}

int main(int argc, char** argv) {
  Args args(argc, argv);
  std::string host;
  int port = 0;
  splitAddr(args.str("addr", ""), host, port);
  std::string req = payload(args.num("size", 0));
  try {
    if (args.num("callers", 0) == 0) return latency(host, port, req, args);
    return throughput(host, port, req, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "atb-apache-cpp-client: %s\n", e.what());
    return 1;
  }
}
