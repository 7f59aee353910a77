// hvd-bench: nccl-tests style benchmark of hvd's collectives.
//
//   hvd-local-run -np 4 -- hvd-bench --coll allreduce -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float
//
// For each size from -b to -e (multiplied by -f) it times the collective out-of-place and then
// in-place: a barrier, -w warm-up calls, a barrier, -n timed calls; the time is the average per
// call, max over ranks. algbw = size / time, busbw = algbw x the collective's bus factor
// (allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast 1), as in
// nccl-tests. `size` is the total buffer size, as nccl-tests counts it:
//
//   allreduce      send = recv = size
//   allgather      send = size / n, recv = size          (in-place: send is the rank's slot)
//   reducescatter  send = size, recv = size / n          (in-place: recv is the rank's chunk)
//   broadcast      one buffer of size (out-of-place and in-place are the same call, run twice)
//   alltoall       send = recv = size, size / n to each peer (no in-place: N/A columns)
//
// Counts are rounded down so that every rank gets the same whole number of elements; sizes
// that round to zero elements are skipped. With -c 1 every mode is then checked outside the
// timed loop on one more call: inputs are exact by construction (element i of rank r is
// (i*7 + r*13 + salt) % 17, with a salt that changes on every check; 1 + that % 2 for prod), the
// output is poisoned beforehand, and every element is compared bit for bit with the result
// computed locally the way the runtime rounds it. #wrong is the number of wrong elements,
// summed over ranks.
//
// Every buffer is allocated and touched once, at the largest size, before the size loop.
// Only rank 0 prints. Exit status: 0 when every element was right, 1 when some were wrong,
// 2 for a usage error, 3 when hvd (or the process) failed.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "hvd/error.hpp"
#include "hvd/hvd.hpp"
#include "hvd/types.hpp"

namespace {

constexpr int kPeriod = 17;  // the input pattern repeats every 17 elements
constexpr size_t kMaxElem = 8;

enum class Coll { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall };

struct CollInfo {
  const char* name;
  Coll coll;
};
constexpr CollInfo kColls[] = {{"allreduce", Coll::kAllreduce},
                               {"allgather", Coll::kAllgather},
                               {"broadcast", Coll::kBroadcast},
                               {"reducescatter", Coll::kReducescatter},
                               {"alltoall", Coll::kAlltoall}};

bool reduces(Coll c) { return c == Coll::kAllreduce || c == Coll::kReducescatter; }

struct Options {
  Coll coll = Coll::kAllreduce;
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  hvd::DataType type = hvd::DataType::kFloat32;
  hvd::ReduceOp op = hvd::ReduceOp::kSum;
  int root = 0;
};

// A command-line mistake: printed as "hvd-bench: <message>" with a usage hint, exit status 2.
struct UsageError {
  std::string message;
};

// Only rank 0 prints. Before hvd::init() the rank comes from the environment the launcher set.
bool g_quiet = false;

const char* collName(Coll c) {
  for (const auto& info : kColls) {
    if (info.coll == c) return info.name;
  }
  return "?";
}

// nccl-tests' short type names, for the table.
const char* typeColumn(hvd::DataType t) {
  switch (t) {
    case hvd::DataType::kFloat32:
      return "float";
    case hvd::DataType::kFloat64:
      return "double";
    case hvd::DataType::kFloat16:
      return "half";
    case hvd::DataType::kBFloat16:
      return "bfloat16";
    case hvd::DataType::kInt8:
      return "int8";
    case hvd::DataType::kUInt8:
      return "uint8";
    case hvd::DataType::kInt32:
      return "int32";
    case hvd::DataType::kInt64:
      return "int64";
  }
  return "?";
}

const char* opColumn(hvd::ReduceOp op) {
  switch (op) {
    case hvd::ReduceOp::kSum:
      return "sum";
    case hvd::ReduceOp::kAverage:
      return "avg";
    case hvd::ReduceOp::kMin:
      return "min";
    case hvd::ReduceOp::kMax:
      return "max";
    case hvd::ReduceOp::kProduct:
      return "prod";
  }
  return "?";
}

void printUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: hvd-bench [--coll NAME] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS]\n"
      "                 [-w WARMUP] [-c 0|1] [-d DTYPE] [-o OP] [-r ROOT]\n"
      "\n"
      "nccl-tests style benchmark of hvd's collectives; run one copy per rank under a launcher\n"
      "(hvd-local-run -np N -- hvd-bench ...). Only rank 0 prints.\n"
      "\n"
      "  --coll NAME          allreduce (default), allgather, broadcast, reducescatter, alltoall\n"
      "  -b, --minbytes N     smallest total buffer size in bytes (default 8)\n"
      "  -e, --maxbytes N     largest total buffer size in bytes (default 64M)\n"
      "  -f, --stepfactor N   multiply the size by N (an integer >= 2) between rows (default 2)\n"
      "  -n, --iters N        timed calls per size and mode (default 20)\n"
      "  -w, --warmup_iters N untimed warm-up calls before them (default 5)\n"
      "  -c, --check 0|1      check every element of one more call per mode (default 1)\n"
      "  -d, --datatype T     float32 (float), float64 (double), float16 (half), bfloat16,\n"
      "                       int8, uint8, int32 (int), int64 (default float32)\n"
      "  -o, --op OP          sum, average (avg), min, max, product (prod) (default sum);\n"
      "                       allreduce and reducescatter only\n"
      "  -r, --root R         broadcast root rank (default 0)\n"
      "  -h, --help           this text\n"
      "\n"
      "Sizes take K, M or G suffixes (powers of 1024; a trailing B or iB is allowed). For\n"
      "allgather, reducescatter and alltoall the size is the total buffer, as in nccl-tests.\n"
      "Options also take the --name=value form.\n"
      "Exit status: 0 all elements right, 1 wrong elements, 2 usage error, 3 hvd error.\n");
}

// "64", "8K", "256M", "1G", "4KiB", "16MB": binary multiples.
bool parseSize(const std::string& s, size_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0) return false;
  unsigned long long mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1ULL << 10;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1ULL << 20;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1ULL << 30;
      ++end;
      break;
    default:
      break;
  }
  if (mult > 1 && *end == 'i') ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v > SIZE_MAX / mult) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parseInt(const std::string& s, long min, long max, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

Options parseOptions(int argc, char** argv, bool* help) {
  Options o;
  *help = false;
  struct Flag {
    const char* shortName;
    const char* longName;
  };
  static const Flag kFlags[] = {
      {"-b", "--minbytes"},     {"-e", "--maxbytes"}, {"-f", "--stepfactor"}, {"-n", "--iters"},
      {"-w", "--warmup_iters"}, {"-c", "--check"},    {"-d", "--datatype"},   {"-o", "--op"},
      {"-r", "--root"},         {nullptr, "--coll"}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return o;
    }
    std::string value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasValue = true;
      }
    }
    const Flag* flag = nullptr;
    for (const auto& f : kFlags) {
      if ((f.shortName && arg == f.shortName) || arg == f.longName) flag = &f;
    }
    if (flag == nullptr) {
      if (!arg.empty() && arg[0] == '-') throw UsageError{"unknown option '" + arg + "'"};
      throw UsageError{"unexpected argument '" + arg + "'"};
    }
    const std::string name = flag->shortName ? flag->shortName : flag->longName;
    if (!hasValue) {
      if (i + 1 >= argc) throw UsageError{"option " + arg + " needs a value"};
      value = argv[++i];
    }
    auto bad = [&](const std::string& what) {
      return UsageError{"bad value '" + value + "' for " + arg + ": " + what};
    };
    long v = 0;
    if (name == "-b") {
      if (!parseSize(value, &o.minBytes)) throw bad("expected a size such as 8, 64K or 1M");
    } else if (name == "-e") {
      if (!parseSize(value, &o.maxBytes)) throw bad("expected a size such as 8, 64K or 1M");
    } else if (name == "-f") {
      if (!parseInt(value, 2, INT_MAX, &v)) throw bad("expected an integer >= 2");
      o.factor = static_cast<size_t>(v);
    } else if (name == "-n") {
      if (!parseInt(value, 1, INT_MAX, &v)) throw bad("expected an integer >= 1");
      o.iters = static_cast<int>(v);
    } else if (name == "-w") {
      if (!parseInt(value, 0, INT_MAX, &v)) throw bad("expected an integer >= 0");
      o.warmup = static_cast<int>(v);
    } else if (name == "-c") {
      if (!parseInt(value, 0, 1, &v)) throw bad("expected 0 or 1");
      o.check = static_cast<int>(v);
    } else if (name == "-r") {
      if (!parseInt(value, 0, INT_MAX, &v)) throw bad("expected a rank >= 0");
      o.root = static_cast<int>(v);
    } else if (name == "-d") {
      try {
        o.type = hvd::parseDataType(value);
      } catch (const hvd::Error& e) {
        throw UsageError{std::string(arg) + ": " + e.what()};
      }
    } else if (name == "-o") {
      try {
        o.op = hvd::parseReduceOp(value);
      } catch (const hvd::Error& e) {
        throw UsageError{std::string(arg) + ": " + e.what()};
      }
    } else if (name == "--coll") {
      bool found = false;
      for (const auto& info : kColls) {
        if (value == info.name) {
          o.coll = info.coll;
          found = true;
        }
      }
      if (!found) {
        throw bad("expected allreduce, allgather, broadcast, reducescatter or alltoall");
      }
    }
  }
  if (o.minBytes == 0) throw UsageError{"-b must be at least 1 byte"};
  if (o.minBytes > o.maxBytes) {
    throw UsageError{"-b (" + std::to_string(o.minBytes) + ") is larger than -e (" +
                     std::to_string(o.maxBytes) + ")"};
  }
  return o;
}

// --- exact patterns ---------------------------------------------------------------------------

// One period (17 elements) of a buffer, as bytes of the element type.
struct Pattern {
  uint8_t bytes[kPeriod * kMaxElem];
};

int64_t inputValue(hvd::ReduceOp op, bool reduction, int k, int r, int salt) {
  const int64_t x = (static_cast<int64_t>(k) * 7 + static_cast<int64_t>(r) * 13 + salt) % kPeriod;
  return reduction && op == hvd::ReduceOp::kProduct ? 1 + (x & 1) : x;
}

template <typename T>
void storeAs(T value, uint8_t* dst) {
  std::memcpy(dst, &value, sizeof(T));
}

// Stores the small exact integer v as the element type.
void storeInput(hvd::DataType t, int64_t v, uint8_t* dst) {
  switch (t) {
    case hvd::DataType::kInt8:
      return storeAs(static_cast<int8_t>(v), dst);
    case hvd::DataType::kUInt8:
      return storeAs(static_cast<uint8_t>(v), dst);
    case hvd::DataType::kInt32:
      return storeAs(static_cast<int32_t>(v), dst);
    case hvd::DataType::kInt64:
      return storeAs(static_cast<int64_t>(v), dst);
    case hvd::DataType::kFloat16:
      return storeAs(hvd::floatToHalf(static_cast<float>(v)), dst);
    case hvd::DataType::kBFloat16:
      return storeAs(hvd::floatToBfloat16(static_cast<float>(v)), dst);
    case hvd::DataType::kFloat32:
      return storeAs(static_cast<float>(v), dst);
    case hvd::DataType::kFloat64:
      return storeAs(static_cast<double>(v), dst);
  }
}

// Integer result: sum and product wrap in two's complement like the runtime; the average is the
// wrapped sum divided by n in the element type (truncating toward zero).
template <typename T>
void storeIntResult(hvd::ReduceOp op, uint64_t wrapped, int64_t exact, int n, uint8_t* dst) {
  using U = std::make_unsigned_t<T>;
  T value;
  if (op == hvd::ReduceOp::kMin || op == hvd::ReduceOp::kMax) {
    value = static_cast<T>(exact);
  } else {
    value = static_cast<T>(static_cast<U>(wrapped));
    if (op == hvd::ReduceOp::kAverage) value = static_cast<T>(value / static_cast<T>(n));
  }
  storeAs(value, dst);
}

// Floating-point result: the exact value rounded to the type; the average converts the sum to
// float (double for float64), divides by n and rounds to the type, as the runtime does.
void storeFloatResult(hvd::DataType t, hvd::ReduceOp op, double exact, int n, uint8_t* dst) {
  const bool avg = op == hvd::ReduceOp::kAverage;
  switch (t) {
    case hvd::DataType::kFloat16: {
      uint16_t h = hvd::floatToHalf(static_cast<float>(exact));
      if (avg) h = hvd::floatToHalf(hvd::halfToFloat(h) / static_cast<float>(n));
      return storeAs(h, dst);
    }
    case hvd::DataType::kBFloat16: {
      uint16_t h = hvd::floatToBfloat16(static_cast<float>(exact));
      if (avg) h = hvd::floatToBfloat16(hvd::bfloat16ToFloat(h) / static_cast<float>(n));
      return storeAs(h, dst);
    }
    case hvd::DataType::kFloat32: {
      float f = static_cast<float>(exact);
      if (avg) f = f / static_cast<float>(n);
      return storeAs(f, dst);
    }
    case hvd::DataType::kFloat64: {
      double d = exact;
      if (avg) d = d / static_cast<double>(n);
      return storeAs(d, dst);
    }
    default:
      return;
  }
}

// Period of rank r's input (also the expected output of non-reducing collectives).
Pattern inputPattern(const Options& o, int r, int salt) {
  Pattern p{};
  const size_t es = hvd::dataTypeSize(o.type);
  for (int k = 0; k < kPeriod; ++k) {
    storeInput(o.type, inputValue(o.op, reduces(o.coll), k, r, salt), p.bytes + k * es);
  }
  return p;
}

// Period of the reduction over n ranks.
Pattern reducedPattern(const Options& o, int n, int salt) {
  Pattern p{};
  const size_t es = hvd::dataTypeSize(o.type);
  for (int k = 0; k < kPeriod; ++k) {
    int64_t exact = inputValue(o.op, true, k, 0, salt);
    uint64_t wrapped = static_cast<uint64_t>(exact);
    double real = static_cast<double>(exact);
    for (int r = 1; r < n; ++r) {
      const int64_t v = inputValue(o.op, true, k, r, salt);
      switch (o.op) {
        case hvd::ReduceOp::kSum:
        case hvd::ReduceOp::kAverage:
          wrapped += static_cast<uint64_t>(v);
          real += static_cast<double>(v);
          break;
        case hvd::ReduceOp::kProduct:
          wrapped *= static_cast<uint64_t>(v);
          real *= static_cast<double>(v);
          break;
        case hvd::ReduceOp::kMin:
          exact = std::min(exact, v);
          break;
        case hvd::ReduceOp::kMax:
          exact = std::max(exact, v);
          break;
      }
    }
    if (o.op == hvd::ReduceOp::kMin || o.op == hvd::ReduceOp::kMax) {
      real = static_cast<double>(exact);
    }
    uint8_t* dst = p.bytes + k * es;
    switch (o.type) {
      case hvd::DataType::kInt8:
        storeIntResult<int8_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kUInt8:
        storeIntResult<uint8_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kInt32:
        storeIntResult<int32_t>(o.op, wrapped, exact, n, dst);
        break;
      case hvd::DataType::kInt64:
        storeIntResult<int64_t>(o.op, wrapped, exact, n, dst);
        break;
      default:
        storeFloatResult(o.type, o.op, real, n, dst);
        break;
    }
  }
  return p;
}

// The pattern rotated so that its element 0 is the one of global index `first`.
Pattern rotated(const Pattern& p, size_t first, size_t es) {
  Pattern out{};
  const size_t phase = first % kPeriod;
  for (size_t k = 0; k < static_cast<size_t>(kPeriod); ++k) {
    std::memcpy(out.bytes + k * es, p.bytes + ((phase + k) % kPeriod) * es, es);
  }
  return out;
}

// Fills count elements; element j gets the pattern's element of global index first + j.
void fill(uint8_t* buf, size_t count, size_t first, const Pattern& p, size_t es) {
  if (count == 0) return;
  const Pattern rot = rotated(p, first, es);
  const size_t total = count * es;
  size_t filled = std::min(total, kPeriod * es);
  std::memcpy(buf, rot.bytes, filled);
  while (filled < total) {  // filled is a whole number of periods here
    const size_t n = std::min(filled, total - filled);
    std::memcpy(buf + filled, buf, n);
    filled += n;
  }
}

// Number of elements that differ (bit for bit) from the pattern, indexed as in fill().
long long countWrong(const uint8_t* buf, size_t count, size_t first, const Pattern& p, size_t es) {
  if (count == 0) return 0;
  const Pattern rot = rotated(p, first, es);
  const size_t total = count * es;
  const size_t period = kPeriod * es;
  long long wrong = 0;
  for (size_t off = 0; off < total; off += period) {
    const size_t n = std::min(period, total - off);
    if (std::memcmp(buf + off, rot.bytes, n) == 0) continue;
    for (size_t e = 0; e < n; e += es) wrong += std::memcmp(buf + off + e, rot.bytes + e, es) != 0;
  }
  return wrong;
}

void poison(uint8_t* buf, size_t count, size_t es) {
  if (count > 0) std::memset(buf, 0xff, count * es);
}

// --- sizes ------------------------------------------------------------------------------------

// One row: the total size and the element counts of the collective's buffers.
struct Row {
  size_t bytes = 0;      // total buffer size (the size column)
  size_t count = 0;      // total elements (the count column)
  size_t perRank = 0;    // per-rank block (allgather send, reducescatter recv, alltoall per peer)
  size_t sendBytes = 0;  // buffer sizes this row needs
  size_t recvBytes = 0;
};

std::vector<Row> plan(const Options& o, int n) {
  std::vector<Row> rows;
  const size_t es = hvd::dataTypeSize(o.type);
  const size_t un = static_cast<size_t>(n);
  for (size_t bytes = o.minBytes;;) {
    Row row;
    switch (o.coll) {
      case Coll::kAllreduce:
      case Coll::kBroadcast:
        row.count = bytes / es;
        row.perRank = row.count;
        row.sendBytes = o.coll == Coll::kBroadcast ? 0 : row.count * es;
        row.recvBytes = row.count * es;
        break;
      case Coll::kAllgather:
        row.perRank = bytes / es / un;
        row.count = row.perRank * un;
        row.sendBytes = row.perRank * es;
        row.recvBytes = row.count * es;
        break;
      case Coll::kReducescatter:
        row.perRank = bytes / es / un;
        row.count = row.perRank * un;
        row.sendBytes = row.count * es;
        row.recvBytes = row.count * es;  // the in-place run reduces within the recv buffer
        break;
      case Coll::kAlltoall:
        row.perRank = bytes / es / un;
        row.count = row.perRank * un;
        row.sendBytes = row.count * es;
        row.recvBytes = row.count * es;
        break;
    }
    row.bytes = row.count * es;
    if (row.count > 0) rows.push_back(row);
    if (bytes > o.maxBytes / o.factor) break;  // the next size would pass -e (or overflow)
    bytes *= o.factor;
  }
  return rows;
}

uint8_t* allocTouched(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0) return nullptr;
  std::memset(p, 0, std::max<size_t>(bytes, 1));  // fault in every page before timing
  return static_cast<uint8_t*>(p);
}

struct Buffer {
  uint8_t* data = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(data); }
};

// Average microseconds per call on this rank.
double timeCalls(const Options& o, const std::function<void()>& call) {
  hvd::barrier();
  for (int i = 0; i < o.warmup; ++i) call();
  hvd::barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) call();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
}

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Coll::kAllgather:
    case Coll::kReducescatter:
    case Coll::kAlltoall:
      return static_cast<double>(n - 1) / n;
    case Coll::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

// Time with about 8 significant characters: 2 decimals below 10 ms, fewer above.
void printTime(double us) {
  if (us < 1e4) {
    std::printf(" %8.2f", us);
  } else if (us < 1e5) {
    std::printf(" %8.1f", us);
  } else {
    std::printf(" %8.0f", us);
  }
}

int runBenchmark(const Options& o) {
  const int n = hvd::size();
  const int rank = hvd::rank();
  if (o.coll == Coll::kBroadcast && o.root >= n) {
    throw UsageError{"-r " + std::to_string(o.root) + " is not a rank (np " + std::to_string(n) +
                     ")"};
  }
  const size_t es = hvd::dataTypeSize(o.type);
  const std::vector<Row> rows = plan(o, n);
  size_t sendBytes = 0, recvBytes = 0;
  for (const Row& row : rows) {
    sendBytes = std::max(sendBytes, row.sendBytes);
    recvBytes = std::max(recvBytes, row.recvBytes);
  }
  Buffer sendBuf, recvBuf;
  sendBuf.data = allocTouched(sendBytes);
  recvBuf.data = allocTouched(recvBytes);
  if (!sendBuf.data || !recvBuf.data) {
    throw std::runtime_error("rank " + std::to_string(rank) + ": cannot allocate " +
                             std::to_string(sendBytes) + " + " + std::to_string(recvBytes) +
                             " bytes");
  }
  uint8_t* const send = sendBuf.data;
  uint8_t* const recv = recvBuf.data;
  const bool reduction = reduces(o.coll);
  const bool hasInPlace = o.coll != Coll::kAlltoall;
  const int root = o.coll == Coll::kBroadcast ? o.root : -1;
  const char* opText = reduction ? opColumn(o.op) : "none";

  if (rank == 0) {
    std::printf("# hvd-bench %s: np %d, transport %s, dtype %s, op %s, iters %d, warmup %d\n",
                collName(o.coll), n, hvd::transportDescription().c_str(), hvd::dataTypeName(o.type),
                opText, o.iters, o.warmup);
    std::printf("#\n");
    std::printf(
        "#                                                       out-of-place"
        "                       in-place\n");
    std::printf(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n");
    std::printf(
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)\n");
    std::fflush(stdout);
  }

  const double factor = busFactor(o.coll, n);
  int salt = 0;  // changes on every checked call, so a stale result cannot pass
  long long totalWrong = 0;
  double bwSum = 0;
  int bwCount = 0;
  const hvd::AllreduceOptions arOpts{o.op};
  hvd::ReducescatterOptions rsOpts;
  rsOpts.op = o.op;
  const hvd::BroadcastOptions bcOpts{o.root};

  // Warm the job up before the first row, as nccl-tests does: the first collectives after init
  // pay one-off costs (peers still finishing their own start-up, scheduler placement of the
  // ranks) that would otherwise land in the first row's time.
  for (int i = 0; i < 100; ++i) hvd::barrier();
  if (!rows.empty()) {
    const size_t warmCount = rows.back().count;
    for (int i = 0; i < 3 && o.coll == Coll::kAllreduce; ++i) {
      hvd::allreduce(send, recv, warmCount, o.type, arOpts);
    }
  }

  for (const Row& row : rows) {
    const size_t count = row.count;
    const size_t c = row.perRank;
    const std::vector<size_t> counts(n, c);
    double t[2] = {0, 0};
    long long wrong[2] = {0, 0};

    // Out-of-place (m = 0) and in-place (m = 1): the call, how to fill its inputs for a salt,
    // and how to count the wrong elements of its result.
    std::function<void()> call[2];
    std::function<void(int)> prepare[2];
    std::function<long long(int)> verify[2];
    switch (o.coll) {
      case Coll::kAllreduce:
        call[0] = [&] { hvd::allreduce(send, recv, count, o.type, arOpts); };
        call[1] = [&] { hvd::allreduce(recv, recv, count, o.type, arOpts); };
        prepare[0] = [&](int s) {
          fill(send, count, 0, inputPattern(o, rank, s), es);
          poison(recv, count, es);
        };
        prepare[1] = [&](int s) { fill(recv, count, 0, inputPattern(o, rank, s), es); };
        verify[0] = verify[1] = [&](int s) {
          return countWrong(recv, count, 0, reducedPattern(o, n, s), es);
        };
        break;
      case Coll::kReducescatter: {
        uint8_t* const chunk = recv + static_cast<size_t>(rank) * c * es;
        call[0] = [&] { hvd::reducescatter(send, recv, count, o.type, rsOpts); };
        call[1] = [&, chunk] { hvd::reducescatter(recv, chunk, count, o.type, rsOpts); };
        prepare[0] = [&](int s) {
          fill(send, count, 0, inputPattern(o, rank, s), es);
          poison(recv, c, es);
        };
        prepare[1] = [&](int s) { fill(recv, count, 0, inputPattern(o, rank, s), es); };
        verify[0] = [&](int s) {
          return countWrong(recv, c, static_cast<size_t>(rank) * c, reducedPattern(o, n, s), es);
        };
        verify[1] = [&, chunk](int s) {
          return countWrong(chunk, c, static_cast<size_t>(rank) * c, reducedPattern(o, n, s), es);
        };
        break;
      }
      case Coll::kAllgather: {
        uint8_t* const slot = recv + static_cast<size_t>(rank) * c * es;
        call[0] = [&] { hvd::allgather(send, c, recv, counts, o.type); };
        call[1] = [&, slot] { hvd::allgather(slot, c, recv, counts, o.type); };
        prepare[0] = [&](int s) {
          fill(send, c, 0, inputPattern(o, rank, s), es);
          poison(recv, count, es);
        };
        prepare[1] = [&, slot](int s) {
          poison(recv, count, es);
          fill(slot, c, 0, inputPattern(o, rank, s), es);
        };
        verify[0] = verify[1] = [&](int s) {
          long long w = 0;
          for (int p = 0; p < n; ++p) {
            w +=
                countWrong(recv + static_cast<size_t>(p) * c * es, c, 0, inputPattern(o, p, s), es);
          }
          return w;
        };
        break;
      }
      case Coll::kBroadcast:
        // One buffer: both columns run the same call.
        call[0] = call[1] = [&] { hvd::broadcast(recv, count, o.type, bcOpts); };
        prepare[0] = prepare[1] = [&](int s) {
          if (rank == o.root) {
            fill(recv, count, 0, inputPattern(o, o.root, s), es);
          } else {
            poison(recv, count, es);
          }
        };
        verify[0] = verify[1] = [&](int s) {
          return countWrong(recv, count, 0, inputPattern(o, o.root, s), es);
        };
        break;
      case Coll::kAlltoall:
        call[0] = [&] { hvd::alltoall(send, counts, recv, counts, o.type); };
        prepare[0] = [&](int s) {
          fill(send, count, 0, inputPattern(o, rank, s), es);
          poison(recv, count, es);
        };
        verify[0] = [&](int s) {
          long long w = 0;
          for (int p = 0; p < n; ++p) {
            // Rank p's block for this rank starts at index rank * c of p's input.
            w += countWrong(recv + static_cast<size_t>(p) * c * es, c,
                            static_cast<size_t>(rank) * c, inputPattern(o, p, s), es);
          }
          return w;
        };
        break;
    }

    for (int m = 0; m < (hasInPlace ? 2 : 1); ++m) {
      prepare[m](0);
      t[m] = timeCalls(o, call[m]);
      if (o.check) {
        ++salt;
        prepare[m](salt);
        call[m]();
        wrong[m] = verify[m](salt);
      }
    }

    hvd::allreduce(t, t, 2, hvd::DataType::kFloat64, hvd::AllreduceOptions{hvd::ReduceOp::kMax});
    int64_t w64[2] = {wrong[0], wrong[1]};
    hvd::allreduce(w64, w64, 2, hvd::DataType::kInt64, hvd::AllreduceOptions{hvd::ReduceOp::kSum});
    totalWrong += w64[0] + w64[1];

    if (rank == 0) {
      std::printf("%12zu %14zu %9s %7s %7d", row.bytes, count, typeColumn(o.type), opText, root);
      for (int m = 0; m < 2; ++m) {
        if (m == 1 && !hasInPlace) {
          std::printf(" %8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
          continue;
        }
        const double algbw = static_cast<double>(row.bytes) / t[m] / 1e3;  // bytes/us/1e3 = GB/s
        const double busbw = algbw * factor;
        bwSum += busbw;
        ++bwCount;
        printTime(t[m]);
        std::printf(" %7.2f %7.2f", algbw, busbw);
        if (o.check) {
          std::printf(" %6lld", static_cast<long long>(w64[m]));
        } else {
          std::printf(" %6s", "N/A");
        }
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  if (rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f\n", bwCount ? bwSum / bwCount : 0.0);
    std::printf("#\n");
    std::fflush(stdout);
  }
  return totalWrong ? 1 : 0;
}

void shutdownQuietly() {
  try {
    hvd::shutdown();
  } catch (...) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* envRank = std::getenv("HVD_RANK");
  g_quiet = envRank != nullptr && std::strcmp(envRank, "0") != 0;

  Options o;
  try {
    bool help = false;
    o = parseOptions(argc, argv, &help);
    if (help) {
      if (!g_quiet) printUsage(stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    if (!g_quiet) {
      std::fprintf(stderr, "hvd-bench: %s\n(hvd-bench --help lists the options)\n",
                   e.message.c_str());
    }
    return 2;
  }

  int status = 0;
  try {
    hvd::init();
    g_quiet = hvd::rank() != 0;
    status = runBenchmark(o);
  } catch (const UsageError& e) {
    if (!g_quiet) {
      std::fprintf(stderr, "hvd-bench: %s\n(hvd-bench --help lists the options)\n",
                   e.message.c_str());
    }
    status = 2;
  } catch (const hvd::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    status = 3;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "hvd-bench: %s\n", e.what());
    status = 3;
  }
  shutdownQuietly();
  return status;
}
