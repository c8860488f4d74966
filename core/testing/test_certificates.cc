#include "core/testing/test_certificates.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ardma::testing {

const TestCertificates& TestCertificates::Get() {
  static const TestCertificates* certs = new TestCertificates();
  return *certs;
}

TestCertificates::TestCertificates() {
  char pattern[] = "/tmp/ardma_tls.XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return;
  dir_ = pattern;
  const std::string d = dir_;
  std::ofstream(d + "/san.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  // A certificate request for `name` with key `base`.key, signed by `ca` into `base`.pem.
  auto signed_by = [&](const std::string& base, const std::string& cn, const std::string& ca,
                       bool san) {
    return "openssl req" + key + " -keyout " + base + ".key -out " + base + ".csr -subj /CN=" +
           cn + " && openssl x509 -req -in " + base + ".csr -CA " + ca + ".pem -CAkey " + ca +
           ".key -CAcreateserial -out " + base + ".pem -days 2" +
           (san ? " -extfile san.ext" : "") + " && ";
  };
  std::string script = "cd " + d + " && " +
                       "openssl req -x509" + key + " -keyout ca.key -out ca.pem -days 2 " +
                       "-subj /CN=test-ca && " + signed_by("server", "localhost", "ca", true) +
                       signed_by("app", "app", "ca", false) + "openssl req -x509" + key +
                       " -keyout other.key -out other.pem -days 2 -subj /CN=other && " +
                       signed_by("evil", "localhost", "other", true) + "true";
  ok_ = std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
  static std::string to_remove;
  to_remove = dir_;
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(to_remove, ignored);
  });
}

}  // namespace ardma::testing
