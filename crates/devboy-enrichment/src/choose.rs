//! The choice among candidates: a 0/1 knapsack with a count limit.
//!
//! Each candidate has a value and a predicted cost in tokens; the chosen
//! set must fit the budget and the free prefetch slots. Greedy by value
//! density (even with the usual fix, the best of greedy and the best single
//! item) loses its one-half bound once the count limit binds: two tiny,
//! dense candidates can fill the slots the valuable ones needed. The
//! planner's instances are small (a few edges times a few calls each), so
//! [`best_subset`] is exact: a branch and bound over the candidates in
//! density order, pruned by the smaller of two upper bounds (the
//! fractional knapsack of what is left, and the largest values that fit
//! the slots left). Past [`MAX_EXACT`] candidates only the densest are
//! considered.

/// A candidate: what it is worth, what it costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Item {
    /// Its value (non-negative; zero is never chosen).
    pub value: f64,
    /// Its cost.
    pub cost: usize,
}

/// The most candidates the exact search considers.
pub(crate) const MAX_EXACT: usize = 20;

/// The indices of the items of a most valuable set whose costs fit
/// `budget` and whose size is at most `max_count`, in density order.
pub(crate) fn best_subset(items: &[Item], budget: usize, max_count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].value > 0.0 && items[i].cost <= budget)
        .collect();
    order.sort_by(|&a, &b| density(items[b]).total_cmp(&density(items[a])));
    order.truncate(MAX_EXACT);
    let sorted: Vec<Item> = order.iter().map(|&i| items[i]).collect();
    let mut search = Search {
        items: &sorted,
        best_value: 0.0,
        best: Vec::new(),
        current: Vec::new(),
    };
    search.dfs(0, budget, max_count, 0.0);
    search.best.into_iter().map(|k| order[k]).collect()
}

/// Value per token; a free item comes first (the fractional bound takes
/// items in this order and stops at the first that does not fit, so a free
/// item ordered after it would be left out of the bound and pruned).
fn density(item: Item) -> f64 {
    if item.cost == 0 {
        f64::INFINITY
    } else {
        item.value / item.cost as f64
    }
}

struct Search<'a> {
    items: &'a [Item],
    best_value: f64,
    best: Vec<usize>,
    current: Vec<usize>,
}

impl Search<'_> {
    fn dfs(&mut self, at: usize, budget: usize, slots: usize, value: f64) {
        if value > self.best_value {
            self.best_value = value;
            self.best.clone_from(&self.current);
        }
        if at == self.items.len() || slots == 0 {
            return;
        }
        if value + self.bound(at, budget, slots) <= self.best_value {
            return;
        }
        let item = self.items[at];
        if item.cost <= budget {
            self.current.push(at);
            self.dfs(at + 1, budget - item.cost, slots - 1, value + item.value);
            self.current.pop();
        }
        self.dfs(at + 1, budget, slots, value);
    }

    /// An upper bound on what the items from `at` on can add.
    fn bound(&self, at: usize, budget: usize, slots: usize) -> f64 {
        let rest = &self.items[at..];
        let mut fractional = 0.0;
        let mut room = budget as f64;
        for item in rest {
            let cost = item.cost as f64;
            if cost <= room {
                fractional += item.value;
                room -= cost;
            } else {
                fractional += item.value * room / cost;
                break;
            }
        }
        let mut values: Vec<f64> = rest
            .iter()
            .filter(|i| i.cost <= budget)
            .map(|i| i.value)
            .collect();
        values.sort_by(|a, b| b.total_cmp(a));
        let by_slots: f64 = values.iter().take(slots).sum();
        fractional.min(by_slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    /// The optimum by dynamic programming over (items, count, cost).
    fn optimum(items: &[Item], budget: usize, max_count: usize) -> f64 {
        // best[k][b]: the most value with at most k items costing at most b.
        let mut best = vec![vec![0.0f64; budget + 1]; max_count + 1];
        for item in items {
            for k in (1..=max_count).rev() {
                for b in (item.cost..=budget).rev() {
                    let with = best[k - 1][b - item.cost] + item.value;
                    if with > best[k][b] {
                        best[k][b] = with;
                    }
                }
            }
        }
        best[max_count][budget]
    }

    /// Greedy by density within the count limit, or the best single item,
    /// whichever is worth more: the textbook fix, measured here for
    /// comparison.
    fn greedy_or_best_single(items: &[Item], budget: usize, max_count: usize) -> f64 {
        let mut order: Vec<&Item> = items.iter().filter(|i| i.cost <= budget).collect();
        order.sort_by(|a, b| density(**b).total_cmp(&density(**a)));
        let (mut room, mut taken, mut value) = (budget, 0, 0.0);
        for item in &order {
            if taken < max_count && item.cost <= room {
                room -= item.cost;
                taken += 1;
                value += item.value;
            }
        }
        let single = order.iter().map(|i| i.value).fold(0.0, f64::max);
        if max_count == 0 {
            0.0
        } else {
            value.max(single)
        }
    }

    fn value_of(items: &[Item], chosen: &[usize]) -> f64 {
        chosen.iter().map(|&i| items[i].value).sum()
    }

    fn instance() -> impl Strategy<Value = (Vec<Item>, usize, usize)> {
        (
            prop::collection::vec((0u32..100, 0usize..60), 0..12),
            0usize..150,
            0usize..5,
        )
            .prop_map(|(raw, budget, k)| {
                let items = raw
                    .into_iter()
                    .map(|(v, cost)| Item {
                        value: f64::from(v),
                        cost,
                    })
                    .collect();
                (items, budget, k)
            })
    }

    /// Found by the property below in CI: a free item ordered last by a
    /// density of value per max(cost, 1) fell outside the fractional bound
    /// and was pruned (105 instead of 106).
    #[test]
    fn a_free_item_is_never_pruned() {
        let items = [
            Item {
                value: 25.0,
                cost: 6,
            },
            Item {
                value: 38.0,
                cost: 9,
            },
            Item {
                value: 1.0,
                cost: 0,
            },
            Item {
                value: 67.0,
                cost: 16,
            },
        ];
        let chosen = best_subset(&items, 25, 3);
        assert_eq!(value_of(&items, &chosen), 106.0, "{chosen:?}");
        assert_eq!(optimum(&items, 25, 3), 106.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn the_choice_is_feasible_and_never_below_half_the_optimum(
            (items, budget, k) in instance()
        ) {
            let chosen = best_subset(&items, budget, k);
            let cost: usize = chosen.iter().map(|&i| items[i].cost).sum();
            prop_assert!(cost <= budget && chosen.len() <= k);
            let mut unique = chosen.clone();
            unique.sort_unstable();
            unique.dedup();
            prop_assert_eq!(unique.len(), chosen.len());
            let opt = optimum(&items, budget, k);
            let got = value_of(&items, &chosen);
            prop_assert!(got >= opt / 2.0, "{got} < half of {opt}");
            // It is in fact exact on instances this small.
            prop_assert!((got - opt).abs() < 1e-9, "{got} != {opt}");
        }
    }

    /// The measured ratios over 2,000 random instances: the exact choice
    /// against the optimum, and the textbook greedy for comparison (a
    /// counterexample below shows why it is not used).
    #[test]
    fn measured_ratio_to_the_optimum_over_2000_instances() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = instance();
        let (mut n, mut exact_sum, mut greedy_sum, mut greedy_min) = (0, 0.0, 0.0, 1.0f64);
        while n < 2000 {
            let (items, budget, k) = strategy.new_tree(&mut runner).unwrap().current();
            let opt = optimum(&items, budget, k);
            if opt <= 0.0 {
                continue;
            }
            let exact = value_of(&items, &best_subset(&items, budget, k)) / opt;
            let greedy = greedy_or_best_single(&items, budget, k) / opt;
            assert!(exact >= 0.5, "{items:?} {budget} {k}");
            exact_sum += exact;
            greedy_sum += greedy;
            greedy_min = greedy_min.min(greedy);
            n += 1;
        }
        eprintln!(
            "over {n} instances: best_subset / optimum mean {:.4}; greedy-or-best-single mean {:.4}, min {:.4}",
            exact_sum / n as f64,
            greedy_sum / n as f64,
            greedy_min
        );
        assert!((exact_sum / n as f64 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn greedy_or_best_single_falls_below_half_when_the_count_binds() {
        // Two tiny dense items take two of three slots; three items of 10
        // fill the budget exactly; a big, less dense one lures the best
        // single item.
        let items = [
            Item {
                value: 1.0,
                cost: 0,
            },
            Item {
                value: 1.0,
                cost: 0,
            },
            Item {
                value: 10.0,
                cost: 10,
            },
            Item {
                value: 10.0,
                cost: 10,
            },
            Item {
                value: 10.0,
                cost: 10,
            },
            Item {
                value: 11.0,
                cost: 21,
            },
        ];
        let opt = optimum(&items, 30, 3);
        assert_eq!(opt, 30.0);
        assert!(greedy_or_best_single(&items, 30, 3) < opt / 2.0);
        assert_eq!(value_of(&items, &best_subset(&items, 30, 3)), opt);
    }
}
