#include "common/tls/pem_check.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace dtrain::tls {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(STACK_OF(X509) * p) const { sk_X509_pop_free(p, X509_free); }
};

std::unique_ptr<BIO, Free> Reader(const std::string& pem) {
  return std::unique_ptr<BIO, Free>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in `pem`, in order; empty when none parses.
std::unique_ptr<STACK_OF(X509), Free> ReadCerts(const std::string& pem) {
  std::unique_ptr<STACK_OF(X509), Free> certs(sk_X509_new_null());
  auto bio = Reader(pem);
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) sk_X509_push(certs.get(), c);
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  return certs;
}

}  // namespace

absl::Status CheckPemFiles(const PemFiles& f) {
  std::unique_ptr<STACK_OF(X509), Free> ca;
  if (!f.ca_path.empty()) {
    ca = ReadCerts(f.ca_pem);
    if (sk_X509_num(ca.get()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--tls-ca ", f.ca_path, ": no PEM certificate in it"));
    }
  }
  if (f.cert_path.empty()) return absl::OkStatus();
  std::unique_ptr<STACK_OF(X509), Free> chain = ReadCerts(f.cert_pem);
  if (sk_X509_num(chain.get()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert ", f.cert_path, ": no PEM certificate in it"));
  }
  X509* leaf = sk_X509_value(chain.get(), 0);
  auto kb = Reader(f.key_pem);
  std::unique_ptr<EVP_PKEY, Free> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", f.key_path, ": no unencrypted PEM private key in it"));
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key ", f.key_path, " is not the key of the certificate in --tls-cert ", f.cert_path));
  }
  if (ca == nullptr) return absl::OkStatus();
  std::unique_ptr<X509_STORE, Free> store(X509_STORE_new());
  for (int i = 0; i < sk_X509_num(ca.get()); ++i) X509_STORE_add_cert(store.get(), sk_X509_value(ca.get(), i));
  std::unique_ptr<X509_STORE_CTX, Free> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, chain.get());
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert ", f.cert_path, " does not verify against --tls-ca ",
                                                   f.ca_path, ": ", X509_verify_cert_error_string(err)));
  }
  return absl::OkStatus();
}

}  // namespace dtrain::tls
