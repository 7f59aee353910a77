// -H lists and hostfiles: accepted forms, and for each malformed form an error that quotes the
// token the user typed and says what was expected.
#include "contract/host_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <functional>

#include "contract/host_port.h"
#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

HostSlots hs(const std::string& host, std::optional<int> slots = std::nullopt) {
  return HostSlots{host, slots};
}

std::string errorOf(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string listError(const std::string& spec) {
  return errorOf([&] { parseHostList(spec); });
}

std::string fileError(const std::string& text) {
  return errorOf([&] { parseHostfileText(text, "hosts.txt"); });
}

TEST(HostSpec, ParsesHostsWithAndWithoutSlotCountsInOrder) {
  EXPECT_THAT(parseHostList("h1:4,h2:4,h3"), ElementsAre(hs("h1", 4), hs("h2", 4), hs("h3")));
}

TEST(HostSpec, TrimsWhitespaceAroundTokens) {
  EXPECT_THAT(parseHostList("  h1:2 ,\th2 , h3:1 "),
              ElementsAre(hs("h1", 2), hs("h2"), hs("h3", 1)));
}

TEST(HostSpec, AcceptsIpv4AndQualifiedNames) {
  EXPECT_THAT(parseHostList("10.0.0.1:8,node-1.cluster_a.example"),
              ElementsAre(hs("10.0.0.1", 8), hs("node-1.cluster_a.example")));
}

TEST(HostSpec, AcceptsBracketedIpv6AndRemovesTheBrackets) {
  EXPECT_THAT(parseHostList("[::1]:2,[fe80::1],[fe80::2%eth0]:1"),
              ElementsAre(hs("::1", 2), hs("fe80::1"), hs("fe80::2%eth0", 1)));
}

TEST(HostSpec, AcceptsTheSlotLimitAndLeadingZeros) {
  EXPECT_THAT(parseHostList("a:1000000,b:007"), ElementsAre(hs("a", 1000000), hs("b", 7)));
}

TEST(HostSpec, EmptyListIsRefused) {
  EXPECT_EQ(listError(""),
            "-H: '' is an empty host list (expected HOST or HOST:SLOTS, e.g. node1:4)");
  EXPECT_THAT(listError("   "), HasSubstr("is an empty host list"));
}

TEST(HostSpec, EmptyEntryIsRefusedWithItsPosition) {
  EXPECT_EQ(listError("h1,,h2"),
            "-H: 'h1,,h2' has an empty entry at position 2 (expected HOST or HOST:SLOTS, e.g. "
            "node1:4)");
  EXPECT_THAT(listError("h1,"), HasSubstr("'h1,' has an empty entry at position 2"));
  EXPECT_THAT(listError(",h1"), HasSubstr("',h1' has an empty entry at position 1"));
}

TEST(HostSpec, MissingSlotCountIsRefused) {
  EXPECT_EQ(listError("h0:2,h1:"),
            "-H: 'h1:' has no slot count after ':' (expected HOST or HOST:SLOTS, e.g. node1:4)");
}

TEST(HostSpec, MissingHostIsRefused) {
  EXPECT_THAT(listError(":2"), HasSubstr("-H: ':2' has no host before ':'"));
}

TEST(HostSpec, NonNumericSlotCountIsRefused) {
  EXPECT_THAT(listError("h1:x"),
              HasSubstr("'h1:x' has a slot count 'x' that is not a whole number"));
  EXPECT_THAT(listError("h1:2x"), HasSubstr("'h1:2x' has a slot count '2x'"));
}

TEST(HostSpec, ZeroSlotsIsRefused) {
  EXPECT_THAT(listError("h1:0"), HasSubstr("'h1:0' has 0 slots; a host needs at least 1"));
}

TEST(HostSpec, NegativeSlotsIsRefused) {
  EXPECT_THAT(listError("h1:-1"), HasSubstr("'h1:-1' has a negative slot count '-1'"));
}

TEST(HostSpec, SlotCountAboveTheLimitIsRefused) {
  EXPECT_THAT(listError("h1:1000001"),
              HasSubstr("'h1:1000001' has 1000001 slots, above the limit of 1000000 per host"));
  // Far beyond int range: refused, not wrapped around.
  EXPECT_THAT(listError("h1:99999999999999999999"), HasSubstr("above the limit"));
}

TEST(HostSpec, DoubleColonOrUnbracketedIpv6AsksForBrackets) {
  EXPECT_THAT(listError("h1:2:3"),
              HasSubstr("'h1:2:3' has more than one ':'; an IPv6 address must be written in "
                        "brackets, e.g. [fe80::1]:4"));
  EXPECT_THAT(listError("::1"), HasSubstr("'::1' has more than one ':'"));
}

TEST(HostSpec, UnterminatedBracketIsRefused) {
  EXPECT_THAT(listError("[::1"), HasSubstr("'[::1' has no closing ']' after its IPv6 address"));
  EXPECT_THAT(listError("[::1:2"), HasSubstr("'[::1:2' has no closing ']'"));
}

TEST(HostSpec, MalformedBracketFormsAreRefused) {
  EXPECT_THAT(listError("[]:2"), HasSubstr("'[]:2' has an empty address between '[' and ']'"));
  EXPECT_THAT(listError("[::1]2"), HasSubstr("'[::1]2' has unexpected text after ']'"));
  EXPECT_THAT(listError("[::1]:"), HasSubstr("'[::1]:' has no slot count after ':'"));
  EXPECT_THAT(listError("::1]:2"), HasSubstr("'::1]:2' has more than one ':'"));
  EXPECT_THAT(listError("h1]"), HasSubstr("'h1]' has a stray bracket"));
}

TEST(HostSpec, InvalidCharactersInHostNamesAreRefused) {
  EXPECT_THAT(listError("h1 h2:2"), HasSubstr("'h1 h2:2' has the character ' ' in its host name"));
  EXPECT_THAT(listError("h1=4"), HasSubstr("'h1=4' has the character '='"));
}

TEST(HostSpec, NamesNoResolverAcceptsAreRefusedNamingTheToken) {
  EXPECT_EQ(listError("h1:2,-h2:2"),
            "-H: '-h2:2' has a label '-h2' that starts with '-' (expected HOST or HOST:SLOTS, "
            "e.g. node1:4)");
  EXPECT_THAT(listError("node-.example:4"),
              HasSubstr("'node-.example:4' has a label 'node-' that ends with '-'"));
  EXPECT_THAT(listError("a..b"), HasSubstr("'a..b' has an empty label"));
  EXPECT_THAT(listError(std::string(64, 'x') + ":1"),
              HasSubstr("has a label of 64 characters (at most 63)"));
  EXPECT_THAT(listError("999.1.1.1:2"),
              HasSubstr("'999.1.1.1:2' is neither a host name nor an IPv4 address"));
  EXPECT_THAT(listError("10.0.0:2"), HasSubstr("'10.0.0:2' is neither a host name"));
  EXPECT_THAT(listError("[fe80::zz]:2"),
              HasSubstr("'[fe80::zz]:2' has 'fe80::zz' in brackets, which is not an IPv6 "
                        "address"));
  EXPECT_THAT(listError("[fe80::1%]:2"), HasSubstr("'[fe80::1%]:2' has an empty zone id"));
  EXPECT_THAT(listError("h[1]"), HasSubstr("'h[1]' has a stray bracket"));
}

TEST(Hostfile, NamesNoResolverAcceptsAreRefusedWithTheLine) {
  EXPECT_EQ(fileError("node1 slots=2\nnode_2- slots=2\n"),
            "hosts.txt:2: 'node_2-' has a label 'node_2-' that ends with '-' (expected HOST, "
            "HOST:SLOTS or HOST slots=N, e.g. node1 slots=4)");
  EXPECT_THAT(fileError("[::g] slots=1\n"),
              HasSubstr("hosts.txt:1: '[::g]' has '::g' in brackets, which is not an IPv6"));
}

TEST(HostSpec, DuplicateHostIsRefused) {
  EXPECT_EQ(listError("h1:2,h1:2"),
            "-H: 'h1:2' names host 'h1', which appears twice (first as 'h1:2'); hvd requires "
            "each host once, so give it one entry with its total slots (expected HOST or "
            "HOST:SLOTS, e.g. node1:4)");
  // Host names are case-insensitive (DNS), and a duplicate is one even with other slots.
  EXPECT_THAT(listError("Node1:2,h2,node1"), HasSubstr("'node1' names host 'node1', which appears "
                                                       "twice (first as 'Node1:2')"));
  EXPECT_THAT(listError("[::1]:1,[::1]:2"), HasSubstr("host '::1', which appears twice"));
}

TEST(Hostfile, ParsesSlotsEqualsColonFormPlainHostsAndComments) {
  const std::string text =
      "# cluster A\n"
      "\n"
      "node1 slots=4\n"
      "  node2:2   # two GPUs\n"
      "node3\n"
      "[fe80::1] slots=8\r\n"
      "[::1]:3\n"
      "\t\n";
  EXPECT_THAT(
      parseHostfileText(text, "hosts.txt"),
      ElementsAre(hs("node1", 4), hs("node2", 2), hs("node3"), hs("fe80::1", 8), hs("::1", 3)));
}

TEST(Hostfile, LastLineWithoutNewlineIsParsed) {
  EXPECT_THAT(parseHostfileText("a slots=1\nb slots=2", "f"), ElementsAre(hs("a", 1), hs("b", 2)));
}

TEST(Hostfile, ErrorsNameTheFileLineAndToken) {
  EXPECT_EQ(fileError("# header\nnode1 slots=2\n\nnode2 slots=x\n"),
            "hosts.txt:4: 'slots=x' has a slot count 'x' that is not a whole number (expected "
            "HOST, HOST:SLOTS or HOST slots=N, e.g. node1 slots=4)");
  EXPECT_THAT(fileError("a\nb\nc:\n"), HasSubstr("hosts.txt:3: 'c:' has no slot count after ':'"));
  EXPECT_THAT(fileError("a slots=\n"), HasSubstr("hosts.txt:1: 'slots=' has no slot count after "
                                                 "'slots='"));
  EXPECT_THAT(fileError("\n\na slots=0\n"), HasSubstr("hosts.txt:3: 'slots=0' has 0 slots"));
  EXPECT_THAT(fileError("a:1:2\n"), HasSubstr("hosts.txt:1: 'a:1:2' has more than one ':'"));
  EXPECT_THAT(fileError("ok\n[::1 slots=2\n"), HasSubstr("hosts.txt:2: '[::1' has no closing"));
}

TEST(Hostfile, UnknownFieldIsRefused) {
  EXPECT_THAT(fileError("a slots=2 max_slots=4\n"),
              HasSubstr("hosts.txt:1: 'max_slots=4' is not a known field (only slots=N may "
                        "follow the host)"));
  EXPECT_THAT(fileError("a 4\n"), HasSubstr("hosts.txt:1: '4' is not a known field"));
}

TEST(Hostfile, SlotCountGivenTwiceIsRefused) {
  EXPECT_THAT(fileError("a:2 slots=2\n"), HasSubstr("hosts.txt:1: 'a:2 slots=2' gives the slot "
                                                    "count twice"));
  EXPECT_THAT(fileError("a slots=1 slots=2\n"), HasSubstr("gives the slot count twice"));
}

TEST(Hostfile, DuplicateHostNamesBothLines) {
  EXPECT_THAT(fileError("a slots=1\nb slots=1\na slots=2\n"),
              HasSubstr("hosts.txt:3: 'a' names host 'a', which appears twice (first as line 1)"));
}

TEST(Hostfile, FileWithoutHostsIsRefused) {
  EXPECT_THAT(fileError("# nothing here\n\n"), HasSubstr("hostfile 'hosts.txt' lists no hosts"));
  EXPECT_THAT(fileError(""), HasSubstr("lists no hosts"));
}

TEST(Hostfile, ReadsAFileFromDisk) {
  char path[] = "/tmp/hvd_hostfile_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "n1 slots=2\nn2:3\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  EXPECT_THAT(parseHostfile(path), ElementsAre(hs("n1", 2), hs("n2", 3)));
  std::FILE* f = std::fopen(path, "a");
  ASSERT_NE(f, nullptr);
  std::fputs("n3:x\n", f);
  std::fclose(f);
  EXPECT_THAT(errorOf([&] { parseHostfile(path); }),
              HasSubstr(std::string(path) + ":3: 'n3:x' has a slot count 'x'"));
  unlink(path);
}

TEST(Hostfile, MissingFileNamesThePathAndTheReason) {
  EXPECT_EQ(errorOf([] { parseHostfile("/nonexistent/hvd/hosts"); }),
            "hostfile '/nonexistent/hvd/hosts' cannot be read: No such file or directory");
}

TEST(Hostfile, DirectoryIsRefusedWithTheReason) {
  EXPECT_EQ(errorOf([] { parseHostfile("/tmp"); }),
            "hostfile '/tmp' cannot be read: Is a directory");
}

}  // namespace
}  // namespace hvd::contract

namespace hvd::contract {
namespace {

// One syntax for every address one hvd process gives another: host:port and [IPv6]:port.
TEST(HostPortTest, SplitsHostAndPortAndSaysWhatIsWrongOtherwise) {
  std::string why;
  const auto v4 = splitHostPort("10.0.0.7:40123", &why);
  ASSERT_TRUE(v4.has_value()) << why;
  EXPECT_EQ(v4->host, "10.0.0.7");
  EXPECT_EQ(v4->port, 40123);
  const auto v6 = splitHostPort("[fe80::1]:0", &why);
  ASSERT_TRUE(v6.has_value()) << why;
  EXPECT_EQ(v6->host, "fe80::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(splitHostPort(":80", &why)->host, "");
  for (const auto& [text, reason] : std::vector<std::pair<const char*, const char*>>{
           {"no-port", "no port"},
           {"::1:4000", "an IPv6 address needs brackets"},
           {"[::1]4000", "malformed IPv6 address: no ']:' after it"},
           {"[::1", "malformed IPv6 address: no ']:' after it"},
           {"host:", "the port is not a number"},
           {"host:12ab", "the port is not a number"},
           {"host:123456", "the port is not a number"},
           {"host:65536", "the port is above 65535"}}) {
    why.clear();
    EXPECT_FALSE(splitHostPort(text, &why).has_value()) << text;
    EXPECT_EQ(why, reason) << text;
  }
  EXPECT_EQ(joinHostPort("10.0.0.7", 5), "10.0.0.7:5");
  EXPECT_EQ(joinHostPort("::1", 5), "[::1]:5");
  for (const char* text : {"h:1", "[::1]:65535"}) {
    const auto split = splitHostPort(text, nullptr);
    ASSERT_TRUE(split.has_value());
    EXPECT_EQ(joinHostPort(split->host, split->port), text);
  }
}

}  // namespace
}  // namespace hvd::contract
