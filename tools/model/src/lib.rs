//! placeholder
pub mod model;
pub mod scripts;
pub mod small;
pub mod store;
pub mod world;
