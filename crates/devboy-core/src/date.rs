//! Calendar dates in UTC, for file names and report lines: one function,
//! no date crate (devboy needs nothing beyond the day of a timestamp).

/// The proleptic Gregorian date `(year, month, day)` of a day count since
/// 1970-01-01 (negative before it).
///
/// The algorithm is Howard Hinnant's `civil_from_days`: shift the epoch to
/// 0000-03-01 so that the leap day ends a year, split the day count into
/// 400-year eras of 146,097 days, find the year of the era and the day of
/// that year, and map the day to a month by the 153-days-per-5-months
/// pattern of March to January.
///
/// ```
/// use devboy_core::date::civil_from_days;
/// assert_eq!(civil_from_days(0), (1970, 1, 1));
/// assert_eq!(civil_from_days(-1), (1969, 12, 31));
/// ```
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leap_days_and_century_rules() {
        // 2000 is a leap year (divisible by 400), 2100 is not.
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(47_540), (2100, 2, 28));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
    }
}
