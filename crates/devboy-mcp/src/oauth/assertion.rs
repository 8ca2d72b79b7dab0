//! A client that proves itself with a private key instead of a secret
//! (`private_key_jwt`, RFC 7523 §2.2, as the MCP client-credentials
//! extension uses it): a short-lived JWT naming the client as issuer and
//! subject and the authorization server as audience, signed with the key
//! in a PEM file. Signed with ring, which the TLS stack already builds.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};

/// How long an assertion is good for: one token request.
const LIFETIME_S: u64 = 300;

/// A private key read from PEM, and the JWS algorithm its kind signs with.
pub(super) struct SigningKey {
    kind: Kind,
    rng: SystemRandom,
}

enum Kind {
    Ec(EcdsaKeyPair, &'static str),
    Rsa(RsaKeyPair),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        write!(f, "SigningKey({})", self.algorithm())
    }
}

impl SigningKey {
    /// The key in `pem`: an unencrypted PKCS#8 key (`BEGIN PRIVATE KEY`,
    /// EC P-256 or P-384, or RSA) or a PKCS#1 RSA key (`BEGIN RSA PRIVATE
    /// KEY`). The error says what was found and how to convert it.
    pub(super) fn from_pem(pem: &str) -> Result<Self, String> {
        let (label, der) = pem_block(pem)?;
        let rng = SystemRandom::new();
        let kind = match label.as_str() {
            "PRIVATE KEY" => {
                let ec = |alg, name| {
                    EcdsaKeyPair::from_pkcs8(alg, &der, &rng)
                        .ok()
                        .map(|k| Kind::Ec(k, name))
                };
                ec(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, "ES256")
                    .or_else(|| ec(&signature::ECDSA_P384_SHA384_FIXED_SIGNING, "ES384"))
                    .or_else(|| RsaKeyPair::from_pkcs8(&der).ok().map(Kind::Rsa))
                    .ok_or_else(|| {
                        "a PKCS#8 key that is neither EC P-256, EC P-384 nor RSA (2048 bits or more)"
                            .to_owned()
                    })?
            }
            "RSA PRIVATE KEY" => Kind::Rsa(
                RsaKeyPair::from_der(&der)
                    .map_err(|e| format!("an RSA key that cannot be used: {e}"))?,
            ),
            "EC PRIVATE KEY" => {
                return Err("an EC key in SEC1 form; convert it to PKCS#8 with \
                     `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8.pem`"
                    .to_owned());
            }
            "ENCRYPTED PRIVATE KEY" => {
                return Err("an encrypted key; devboy needs it unencrypted \
                     (`openssl pkcs8 -topk8 -nocrypt`), readable by you only"
                    .to_owned());
            }
            other => return Err(format!("a PEM block `{other}`, not a private key")),
        };
        Ok(Self { kind, rng })
    }

    /// The JWS `alg` of its signatures.
    pub(super) fn algorithm(&self) -> &'static str {
        match &self.kind {
            Kind::Ec(_, name) => name,
            Kind::Rsa(_) => "RS256",
        }
    }

    /// A client assertion: `client_id` as issuer and subject, `audience`
    /// (the authorization server's issuer) as audience, good for five
    /// minutes, with a random `jti` so that it is used once.
    pub(super) fn client_assertion(
        &self,
        client_id: &str,
        audience: &str,
    ) -> Result<String, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut jti = [0u8; 16];
        self.rng
            .fill(&mut jti)
            .map_err(|_| "no randomness for the assertion's id".to_owned())?;
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME_S,
            "jti": URL_SAFE_NO_PAD.encode(jti),
        });
        self.sign(&claims)
    }

    /// `claims` as a compact JWS signed with this key.
    fn sign(&self, claims: &serde_json::Value) -> Result<String, String> {
        let header = serde_json::json!({"alg": self.algorithm(), "typ": "JWT"});
        let mut jwt = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = match &self.kind {
            Kind::Ec(key, _) => key
                .sign(&self.rng, jwt.as_bytes())
                .map_err(|_| "the key cannot sign".to_owned())?
                .as_ref()
                .to_vec(),
            Kind::Rsa(key) => {
                let mut out = vec![0; key.public().modulus_len()];
                key.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &self.rng,
                    jwt.as_bytes(),
                    &mut out,
                )
                .map_err(|_| "the key cannot sign".to_owned())?;
                out
            }
        };
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(signature));
        Ok(jwt)
    }

    /// The public half, as ring's verifiers take it.
    #[cfg(test)]
    fn public_key(&self) -> Vec<u8> {
        use signature::KeyPair as _;
        match &self.kind {
            Kind::Ec(key, _) => key.public_key().as_ref().to_vec(),
            Kind::Rsa(key) => key.public_key().as_ref().to_vec(),
        }
    }
}

/// The label and bytes of the first PEM block in `pem`.
fn pem_block(pem: &str) -> Result<(String, Vec<u8>), String> {
    let start = pem
        .find("-----BEGIN ")
        .ok_or_else(|| "no PEM block (`-----BEGIN PRIVATE KEY-----`)".to_owned())?;
    let rest = &pem[start + "-----BEGIN ".len()..];
    let label_end = rest
        .find("-----")
        .ok_or_else(|| "a PEM header that does not end".to_owned())?;
    let label = rest[..label_end].to_owned();
    let body = &rest[label_end + 5..];
    let end = body
        .find(&format!("-----END {label}-----"))
        .ok_or_else(|| format!("a PEM block `{label}` with no END line"))?;
    let text: String = body[..end]
        .lines()
        .filter(|line| !line.contains(':')) // RFC 1421 headers
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    let der = STANDARD
        .decode(text)
        .map_err(|e| format!("a PEM block `{label}` that is not base64: {e}"))?;
    Ok((label, der))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem(label: &str, der: &[u8]) -> String {
        let body = STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    /// The parts of a compact JWS, decoded, and what was signed.
    fn parts(jwt: &str) -> (serde_json::Value, serde_json::Value, Vec<u8>, String) {
        let pieces: Vec<&str> = jwt.split('.').collect();
        assert_eq!(pieces.len(), 3, "{jwt}");
        let json = |s: &str| serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap();
        (
            json(pieces[0]),
            json(pieces[1]),
            URL_SAFE_NO_PAD.decode(pieces[2]).unwrap(),
            format!("{}.{}", pieces[0], pieces[1]),
        )
    }

    #[test]
    fn an_ec_key_signs_an_assertion_its_public_key_verifies() {
        let rng = SystemRandom::new();
        for (alg, verify, name) in [
            (
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &signature::ECDSA_P256_SHA256_FIXED,
                "ES256",
            ),
            (
                &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
                &signature::ECDSA_P384_SHA384_FIXED,
                "ES384",
            ),
        ] {
            let der = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
            let key = SigningKey::from_pem(&pem("PRIVATE KEY", der.as_ref())).unwrap();
            assert_eq!(key.algorithm(), name);
            let jwt = key
                .client_assertion("machine-1", "https://auth.example")
                .unwrap();
            let (header, claims, sig, signed) = parts(&jwt);
            assert_eq!(header["alg"], name);
            assert_eq!(claims["iss"], "machine-1");
            assert_eq!(claims["sub"], "machine-1");
            assert_eq!(claims["aud"], "https://auth.example");
            let lifetime = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
            assert_eq!(lifetime, LIFETIME_S);
            signature::UnparsedPublicKey::new(verify, key.public_key())
                .verify(signed.as_bytes(), &sig)
                .expect("the signature verifies");
            // A changed claim does not.
            let forged = signed.replace('.', ".e");
            assert!(signature::UnparsedPublicKey::new(verify, key.public_key())
                .verify(forged.as_bytes(), &sig)
                .is_err());
        }
    }

    #[test]
    fn two_assertions_have_different_ids() {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        let key = SigningKey::from_pem(&pem("PRIVATE KEY", der.as_ref())).unwrap();
        let jti = |jwt: String| parts(&jwt).1["jti"].as_str().unwrap().to_owned();
        assert_ne!(
            jti(key.client_assertion("c", "a").unwrap()),
            jti(key.client_assertion("c", "a").unwrap())
        );
    }

    #[test]
    fn an_rsa_key_signs_rs256_in_either_pem_form() {
        // A 2048-bit test key, made for this test with `openssl genrsa`.
        let pkcs1 = include_str!("testdata/rsa-2048.pem");
        let key = SigningKey::from_pem(pkcs1).unwrap();
        assert_eq!(key.algorithm(), "RS256");
        let (header, _, sig, signed) = parts(&key.client_assertion("c", "a").unwrap());
        assert_eq!(header["alg"], "RS256");
        signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, key.public_key())
            .verify(signed.as_bytes(), &sig)
            .expect("the signature verifies");
        let pkcs8 = include_str!("testdata/rsa-2048.pk8.pem");
        assert_eq!(SigningKey::from_pem(pkcs8).unwrap().algorithm(), "RS256");
    }

    #[test]
    fn keys_it_cannot_use_are_named_with_what_to_do() {
        let refused = |text: &str| SigningKey::from_pem(text).unwrap_err();
        assert!(refused("not a key").contains("no PEM block"));
        assert!(refused(&pem("EC PRIVATE KEY", b"x")).contains("openssl pkcs8 -topk8"));
        assert!(refused(&pem("ENCRYPTED PRIVATE KEY", b"x")).contains("unencrypted"));
        assert!(refused(&pem("CERTIFICATE", b"x")).contains("not a private key"));
        assert!(refused(&pem("PRIVATE KEY", b"junk")).contains("neither EC"));
        assert!(
            refused("-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----")
                .contains("not base64")
        );
    }
}
