#include "common/auth/node_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dtrain::auth {
namespace {

constexpr size_t kMacBytes = 32;
// A token is short; a longer header is refused before any parsing.
constexpr size_t kMaxTokenBytes = 256;

std::string Hmac(absl::string_view key, absl::string_view text) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(text.data()),
       text.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Payload(const TokenClaims& c) { return absl::StrCat(RoleName(c.role), ".", c.rank, ".", c.incarnation); }

// The role a token's text names; only the roles that register (server, worker) are
// ever minted, so any other text, "scheduler" included, is no token's.
bool TokenRole(absl::string_view text, Role* role) {
  const absl::StatusOr<Role> parsed = ParseRole(text);
  if (!parsed.ok() || *parsed == Role::kScheduler) return false;
  *role = *parsed;
  return true;
}

}  // namespace

std::string DeriveTokenKey(absl::string_view private_key_pem) {
  return Hmac(private_key_pem, "dtrain node token key v1");
}

std::string MintToken(absl::string_view key, const TokenClaims& claims) {
  const std::string payload = Payload(claims);
  return absl::StrCat(payload, ".", absl::BytesToHexString(Hmac(key, absl::StrCat("dtrain-token-v1|", payload))));
}

absl::StatusOr<TokenClaims> VerifyToken(absl::string_view key, absl::string_view token) {
  if (token.empty()) return absl::UnauthenticatedError("no node token");
  if (token.size() > kMaxTokenBytes) return absl::UnauthenticatedError("node token too long");
  const std::vector<absl::string_view> parts = absl::StrSplit(token, '.');
  TokenClaims c;
  if (parts.size() != 4 || !TokenRole(parts[0], &c.role) || !absl::SimpleAtoi(parts[1], &c.rank) || c.rank < 0 ||
      !absl::SimpleAtoi(parts[2], &c.incarnation) || parts[3].size() != 2 * kMacBytes ||
      parts[3].find_first_not_of("0123456789abcdef") != absl::string_view::npos) {
    return absl::UnauthenticatedError("node token not well formed");
  }
  const std::string mac = absl::HexStringToBytes(parts[3]);
  // Compares only canonical forms ("01" and "1" are the same number), constant-time.
  const std::string want = Hmac(key, absl::StrCat("dtrain-token-v1|", Payload(c)));
  if (key.empty() || mac.size() != want.size() || CRYPTO_memcmp(mac.data(), want.data(), want.size()) != 0 ||
      Payload(c) != absl::StrCat(parts[0], ".", parts[1], ".", parts[2])) {
    return absl::UnauthenticatedError("node token not issued by this job's scheduler");
  }
  return c;
}

std::string Describe(const TokenClaims& c) {
  return absl::StrCat(RoleName(c.role), " ", c.rank, " incarnation ", c.incarnation);
}

void TokenKeyring::Set(std::string key) {
  absl::MutexLock lock(&mu_);
  key_ = std::move(key);
}

std::string TokenKeyring::Get(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(
                            +[](const std::string* key) { return !key->empty(); }, &key_),
                        deadline);
  return key_;
}

}  // namespace dtrain::auth
