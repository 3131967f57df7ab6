//! Every outbound HTTP client is built here: an LLM's or an embeddings endpoint's, and the
//! tests' clients of the gateway.
//!
//! TLS is rustls with ring as its crypto. async-nats builds ring already, so reqwest is built
//! without a provider of its own (the default would be aws-lc-rs, a C build of its own). reqwest
//! then panics when it builds a client before a provider is installed: [`builder`] installs ring
//! first, and `clippy.toml` refuses every other way of building a client.

/// A reqwest client builder; ring is the process's rustls provider from here on.
#[allow(clippy::disallowed_methods)] // the one place allowed to call reqwest's constructor
pub fn builder() -> reqwest::ClientBuilder {
    // An error only says a provider is installed already (by the program embedding us): it stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

/// A client with reqwest's defaults.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    builder().build()
}

#[cfg(test)]
mod tests {
    #[test]
    fn builds_a_client_that_speaks_tls() -> Result<(), reqwest::Error> {
        // Building the TLS configuration is what panics without a provider.
        let _client = super::builder().https_only(true).build()?;
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        Ok(())
    }
}
