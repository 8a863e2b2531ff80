//! Checking `AcquireRequest.resources` (a lock on several resources at
//! once, see `crate::redlock::kinds::multi`): every name as valid as a single
//! `resource`, none twice, at most `redlock.max_resources_per_lock`.

use super::{invalid, InvalidRequest, RequestBounds};
use std::collections::HashSet;

impl RequestBounds {
    /// Checks `resources`, given instead of `resource` (which must then be
    /// empty). Returns the first resource and the whole list, in the order
    /// asked. Every failure names `resources`.
    ///
    /// An empty list cannot be told from an absent one on the wire
    /// (proto3), so it is the single-resource request (then `resource` is
    /// required, INVALID_ARGUMENT naming `resource`); a list holding an
    /// empty name is refused here.
    pub(crate) fn resources(
        &self,
        resource: &str,
        resources: Vec<String>,
    ) -> Result<(String, Vec<String>), InvalidRequest> {
        if !resource.is_empty() {
            return Err(invalid(
                "resources",
                "set instead of resource, not beside it",
            ));
        }
        if resources.len() > self.max_resources_per_lock {
            return Err(invalid(
                "resources",
                format!(
                    "{} resources, more than redlock.max_resources_per_lock ({})",
                    resources.len(),
                    self.max_resources_per_lock
                ),
            ));
        }
        let mut seen = HashSet::with_capacity(resources.len());
        for (index, name) in resources.iter().enumerate() {
            self.resource(name.clone())
                .map_err(|e| invalid("resources", format!("[{index}]: {}", e.reason)))?;
            if !seen.insert(name.as_str()) {
                return Err(invalid("resources", format!("[{index}]: named twice")));
            }
        }
        let first = resources
            .first()
            .cloned()
            .ok_or_else(|| invalid("resources", "must not be empty"))?;
        Ok((first, resources))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::limits;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A valid list keeps its order; the first is the lock's `resource`.
    #[test]
    fn valid_list() {
        let (first, all) = limits()
            .resources("", names(&["b", "a", "c"]))
            .expect("valid");
        assert_eq!(first, "b");
        assert_eq!(all, names(&["b", "a", "c"]));
    }

    /// Each broken rule names `resources`.
    #[test]
    fn broken_rules_name_resources() {
        let l = limits();
        for (resource, list) in [
            ("x", names(&["a"])),
            ("", names(&["a", "a"])),
            ("", names(&["a", ""])),
            ("", names(&["a", "b", "c", "d"])),
            ("", names(&["a", "waytoolongname"])),
            ("", names(&["a\n"])),
            ("", Vec::new()),
        ] {
            let error = l.resources(resource, list.clone()).expect_err("invalid");
            assert_eq!(error.field, "resources", "{list:?}: {error}");
        }
    }
}
