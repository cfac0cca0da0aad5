// The one reader of whole numbers: all of the text a base-10 number that int64_t holds, or none.
#include "trainer/common/whole_number.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace {

TEST(WholeNumber, ReadsTheWholeTextAsOneNumber) {
  EXPECT_EQ(parse_whole_number("0"), 0);
  EXPECT_EQ(parse_whole_number("42"), 42);
  EXPECT_EQ(parse_whole_number("+7"), 7);
  EXPECT_EQ(parse_whole_number("-3"), -3);
  EXPECT_EQ(parse_whole_number("007"), 7);
  EXPECT_EQ(parse_whole_number("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parse_whole_number("-9223372036854775808"), INT64_MIN);
}

TEST(WholeNumber, AnythingElseIsNone) {
  for (const std::string text : {"", " 3", "3 ", "3x", "x3", "3.0", "1e3", "+", "-", "+-3", "++3",
                                 "0x10", "9223372036854775808", "-9223372036854775809"}) {
    EXPECT_FALSE(parse_whole_number(text).has_value()) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace tandem
