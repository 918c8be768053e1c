//! The engine actions the workflows are made of.
