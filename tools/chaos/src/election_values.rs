//! What the mix's elections are called and publish (`crate::elections`),
//! apart from the candidates so that the observers' checks
//! (`crate::observers`) read the same names without depending on them.

/// The value candidate `client` campaigns with.
pub(crate) fn campaign_value(client: u32) -> String {
    format!("candidate-{client}")
}

/// The `n`th value candidate `client`, leader of `term`, proclaims: it
/// names the term, so that `crate::observers::check_values` can tell a
/// value shown under another term.
pub(crate) fn proclaimed(client: u32, term: u64, n: u32) -> String {
    format!("{}/term-{term}/p{n}", campaign_value(client))
}

/// The history's resource of election `name`.
pub(crate) fn resource(name: &str) -> String {
    format!("election:{name}")
}
