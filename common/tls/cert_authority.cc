#include "common/tls/cert_authority.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"

namespace dtrain::tls {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

// OpenSSL's error queue as text, emptied, for messages.
std::string OpenSslError(const std::string& what) {
  std::string detail;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!detail.empty()) detail += "; ";
    detail += buf;
  }
  return detail.empty() ? what : absl::StrCat(what, ": ", detail);
}

absl::StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (key == nullptr) return absl::InternalError(OpenSslError("cannot make an EC P-256 key"));
  return key;
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)) {
    return absl::InternalError(OpenSslError("cannot encode a private key"));
  }
  return BioText(bio.get());
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509(bio.get(), cert)) return absl::InternalError(OpenSslError("cannot encode a certificate"));
  return BioText(bio.get());
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (ext == nullptr || !X509_add_ext(cert, ext.get(), -1)) {
    return absl::InternalError(OpenSslError(absl::StrCat("cannot add extension ", OBJ_nid2sn(nid), "=", value)));
  }
  return absl::OkStatus();
}

// A certificate for `key` named `cn`, not yet signed nor extended.
absl::StatusOr<Cert> NewCert(EVP_PKEY* key, const std::string& cn, absl::Duration validity) {
  Cert cert(X509_new());
  if (cert == nullptr) return absl::InternalError(OpenSslError("cannot allocate a certificate"));
  X509_set_version(cert.get(), 2);  // v3
  // 127 random bits: serials must be unique per CA, and random ones need no counter.
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return absl::InternalError(OpenSslError("no random serial"));
  serial[0] &= 0x7f;
  std::unique_ptr<BIGNUM, Free> bn(BN_bin2bn(serial, sizeof(serial), nullptr));
  BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(absl::ToInt64Seconds(validity)));
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("dtrain"), -1, -1, 0);
  if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                  0)) {
    return absl::InvalidArgumentError(OpenSslError(absl::StrCat("cannot use \"", cn, "\" as a certificate name")));
  }
  X509_set_pubkey(cert.get(), key);
  return cert;
}

bool IsIpAddress(const std::string& s) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

absl::StatusOr<std::pair<std::string, std::string>> WriteKeyAndCert(const std::string& dir, const std::string& stem,
                                                                    const KeyAndCert& kc) {
  const std::string key = absl::StrCat(dir, "/", stem, ".key");
  const std::string crt = absl::StrCat(dir, "/", stem, ".crt");
  if (absl::Status s = WriteFileAtomically(key, kc.key_pem, 0600); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(crt, kc.cert_pem, 0644); !s.ok()) return s;
  return std::pair{key, crt};
}

std::string LeafName(Role role, int rank, const std::string& job) {
  return absl::StrCat(RoleName(role), "-", rank, ".", job);
}

absl::StatusOr<CertAuthority> CertAuthority::Create(const std::string& job, absl::Duration validity) {
  absl::StatusOr<Key> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<Cert> cert = NewCert(key->get(), absl::StrCat("dtrain CA ", job), validity);
  if (!cert.ok()) return cert.status();
  X509_set_issuer_name(cert->get(), X509_get_subject_name(cert->get()));
  for (const auto& [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
        std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"}, std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExtension(cert->get(), cert->get(), nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert->get(), key->get(), EVP_sha256()) == 0) {
    return absl::InternalError(OpenSslError("cannot sign the CA certificate"));
  }
  absl::StatusOr<std::string> key_pem = KeyPem(key->get());
  absl::StatusOr<std::string> cert_pem = CertPem(cert->get());
  if (!key_pem.ok()) return key_pem.status();
  if (!cert_pem.ok()) return cert_pem.status();
  return CertAuthority(KeyAndCert{*std::move(key_pem), *std::move(cert_pem)});
}

absl::StatusOr<CertAuthority> CertAuthority::Load(const std::string& key_pem, const std::string& cert_pem) {
  Bio kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  Key key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) return absl::InvalidArgumentError(OpenSslError("the CA key is not a PEM private key"));
  Bio cb(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  Cert cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) return absl::InvalidArgumentError(OpenSslError("the CA certificate is not a PEM certificate"));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(OpenSslError("the CA key does not belong to the CA certificate"));
  }
  return CertAuthority(KeyAndCert{key_pem, cert_pem});
}

absl::StatusOr<KeyAndCert> CertAuthority::Issue(const std::string& name, const std::vector<std::string>& extra_sans,
                                                absl::Duration validity) const {
  Bio kb(BIO_new_mem_buf(ca_.key_pem.data(), static_cast<int>(ca_.key_pem.size())));
  Key ca_key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  Bio cb(BIO_new_mem_buf(ca_.cert_pem.data(), static_cast<int>(ca_.cert_pem.size())));
  Cert ca_cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  if (ca_key == nullptr || ca_cert == nullptr) return absl::InternalError(OpenSslError("the CA does not parse"));
  absl::StatusOr<Key> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<Cert> cert = NewCert(key->get(), name, validity);
  if (!cert.ok()) return cert.status();
  X509_set_issuer_name(cert->get(), X509_get_subject_name(ca_cert.get()));
  std::vector<std::string> sans = {absl::StrCat("DNS:", name)};
  for (const std::string& s : extra_sans) sans.push_back(absl::StrCat(IsIpAddress(s) ? "IP:" : "DNS:", s));
  for (const auto& [nid, value] : {std::pair{NID_basic_constraints, std::string("critical,CA:FALSE")},
                                   std::pair{NID_key_usage, std::string("critical,digitalSignature")},
                                   std::pair{NID_ext_key_usage, std::string("serverAuth,clientAuth")},
                                   std::pair{NID_authority_key_identifier, std::string("keyid")},
                                   std::pair{NID_subject_alt_name, absl::StrJoin(sans, ",")}}) {
    if (absl::Status s = AddExtension(cert->get(), ca_cert.get(), nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert->get(), ca_key.get(), EVP_sha256()) == 0) {
    return absl::InternalError(OpenSslError(absl::StrCat("cannot sign the certificate of ", name)));
  }
  absl::StatusOr<std::string> key_pem = KeyPem(key->get());
  absl::StatusOr<std::string> cert_pem = CertPem(cert->get());
  if (!key_pem.ok()) return key_pem.status();
  if (!cert_pem.ok()) return cert_pem.status();
  return KeyAndCert{*std::move(key_pem), *std::move(cert_pem)};
}

}  // namespace dtrain::tls
