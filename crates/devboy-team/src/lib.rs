//! Team fingerprints.
