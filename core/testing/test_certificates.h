// TestCertificates: TLS certificates for tests and benchmarks, made once per process with the
// openssl command in a private temporary directory:
//   ca.pem / ca.key          a CA
//   server.pem / server.key  a server certificate the CA signed, for 127.0.0.1 and localhost
//   app.pem / app.key        a client certificate the CA signed, common name "app"
//   other.pem                another CA, and evil.pem / evil.key a server certificate it signed
#ifndef ARDMA_CORE_TESTING_TEST_CERTIFICATES_H_
#define ARDMA_CORE_TESTING_TEST_CERTIFICATES_H_

#include <string>

namespace ardma::testing {

class TestCertificates {
 public:
  static const TestCertificates& Get();
  // False if the openssl command failed (then no file exists).
  bool ok() const { return ok_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  TestCertificates();
  std::string dir_;
  bool ok_ = false;
};

}  // namespace ardma::testing

#endif  // ARDMA_CORE_TESTING_TEST_CERTIFICATES_H_
