// corio::net::errc and the networking error categories.
#include <corio/net/error.hpp>

#include <gtest/gtest.h>
#include <netdb.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace {

TEST(net_error, end_of_stream_is_an_error_code_of_the_corio_net_category) {
  std::error_code code = corio::net::errc::end_of_stream;
  EXPECT_TRUE(code);
  EXPECT_EQ(std::string(code.category().name()), "corio.net");
  EXPECT_EQ(&code.category(), &corio::net::net_category());
  EXPECT_NE(code.message().find("end of stream"), std::string::npos) << code.message();
  EXPECT_EQ(code, corio::net::make_error_code(corio::net::errc::end_of_stream));
  EXPECT_NE(code, std::error_code(1, std::system_category()));
}

TEST(net_error, served_by_another_reactor_names_the_reactor_and_is_not_an_errno) {
  std::error_code code = corio::net::errc::served_by_another_reactor;
  EXPECT_EQ(&code.category(), &corio::net::net_category());
  EXPECT_NE(code.message().find("served by another event loop's or runtime's io_uring reactor"), std::string::npos)
      << code.message();
  EXPECT_NE(code, std::error_code(EXDEV, std::system_category()));
  EXPECT_NE(code, corio::net::errc::end_of_stream);
}

TEST(net_error, resolver_errors_read_as_gai_strerror) {
  std::error_code code(EAI_NONAME, corio::net::resolve_category());
  EXPECT_EQ(code.message(), std::string(::gai_strerror(EAI_NONAME)));
  EXPECT_STRNE(code.category().name(), "corio.net");
}

}  // namespace
