#include "bench_options.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "hvd/error.hpp"
#include "size_parse.h"

namespace hvd::bench {
namespace {

struct CollInfo {
  const char* name;
  Coll coll;
};
constexpr CollInfo kColls[] = {{"allreduce", Coll::kAllreduce},
                               {"allgather", Coll::kAllgather},
                               {"broadcast", Coll::kBroadcast},
                               {"reducescatter", Coll::kReducescatter},
                               {"alltoall", Coll::kAlltoall}};

bool parseInt(const std::string& s, long min, long max, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

bool reduces(Coll c) { return c == Coll::kAllreduce || c == Coll::kReducescatter; }

const char* collName(Coll c) {
  for (const auto& info : kColls) {
    if (info.coll == c) return info.name;
  }
  return "?";
}

void printUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: hvd-bench [--coll NAME] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS]\n"
      "                 [-w WARMUP] [-c 0|1] [-d DTYPE] [-o OP] [-r ROOT]\n"
      "                 [--engine | --process-sets]\n"
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
      "                       int8, uint8, int16 (short), int32 (int), int64 (default\n"
      "                       float32)\n"
      "  -o, --op OP          sum, average (avg), min, max, product (prod) (default sum);\n"
      "                       allreduce and reducescatter only; adasum (floating-point\n"
      "                       allreduce: every rank sends the same vector, which is the result)\n"
      "  -r, --root R         broadcast root rank (default 0)\n"
      "  --engine             allreduce through the engine (async named ops) on every rank\n"
      "  --process-sets       allreduce through the engine in two process sets at once, ranks\n"
      "                       0..n/2-1 and n/2..n-1 (np even); a row per set\n"
      "  -h, --help           this text\n"
      "\n"
      "Sizes take K, M or G suffixes (powers of 1024; a trailing B or iB is allowed). For\n"
      "allgather, reducescatter and alltoall the size is the total buffer, as in nccl-tests.\n"
      "Options also take the --name=value form.\n"
      "Exit status: 0 all elements right, 1 wrong elements, 2 usage error, 3 hvd error.\n");
}

bool parseSize(const std::string& s, size_t* out) {
  return hvd_bench_parse_size(s.c_str(), out) == 0;
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
    if (arg == "--engine" || arg == "--process-sets") {
      o.engine = true;
      o.processSets = o.processSets || arg == "--process-sets";
      continue;
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
  if (o.engine && o.coll != Coll::kAllreduce) {
    throw UsageError{"--engine and --process-sets time allreduce only"};
  }
  if (o.minBytes == 0) throw UsageError{"-b must be at least 1 byte"};
  if (o.minBytes > o.maxBytes) {
    throw UsageError{"-b (" + std::to_string(o.minBytes) + ") is larger than -e (" +
                     std::to_string(o.maxBytes) + ")"};
  }
  return o;
}

}  // namespace hvd::bench
