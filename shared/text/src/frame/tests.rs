use super::read::words;
use super::*;

fn relation(old: &str, new: &str) -> Relation {
    Reading::new(old).relation(&Reading::new(new))
}

#[test]
fn the_same_words_reordered_or_with_other_function_words_are_the_same() {
    assert_eq!(
        relation("Li swims on Saturdays.", "On Saturdays, Li swims."),
        Relation::Same
    );
    assert_eq!(
        relation("Tom lives in Madrid", "Tom now lives in Madrid."),
        Relation::Same
    );
    assert_eq!(
        relation("小王住在北京。", "小王现在住在北京"),
        Relation::Same
    );
}

#[test]
fn another_word_for_the_same_attribute_is_the_same() {
    assert_eq!(
        relation("Li lives in Beijing.", "Li is based in Beijing."),
        Relation::Same
    );
    assert_eq!(
        relation("Li住在北京朝阳区。", "Li家在北京朝阳区。"),
        Relation::Same
    );
    assert_eq!(
        relation("Li lives in Beijing.", "Li works in Beijing."),
        Relation::Differs
    );
}

#[test]
fn a_detail_added_refines_unless_it_is_joined_to_the_subject() {
    assert_eq!(
        relation("Li lives in Beijing.", "Li lives in Chaoyang, Beijing."),
        Relation::Refines {
            new_is_fuller: true
        }
    );
    assert_eq!(
        relation("Li has a dog named Rex.", "Li has a dog."),
        Relation::Refines {
            new_is_fuller: false
        }
    );
    assert_eq!(
        relation("王芳住在北京。", "王芳住在北京朝阳区。"),
        Relation::Refines {
            new_is_fuller: true
        }
    );
    assert_eq!(
        relation("Tom lives in Madrid.", "Tom's cousin lives in Madrid."),
        Relation::Differs
    );
    assert_eq!(
        relation("Tom lives in Madrid.", "Remember: Tom lives in Madrid."),
        Relation::Refines {
            new_is_fuller: true
        }
    );
    assert_eq!(
        relation("王芳住在北京。", "王芳的妹妹住在北京。"),
        Relation::Differs
    );
}

#[test]
fn a_new_value_after_a_one_valued_attribute_changes_it() {
    assert_eq!(
        relation("Tom lives in Madrid.", "Tom now lives in Seville."),
        Relation::Changes(Attribute::Residence)
    );
    assert_eq!(
        relation("Tom lives in Madrid.", "Tom moved to Seville."),
        Relation::Changes(Attribute::Residence)
    );
    assert_eq!(
        relation(
            "Tom's favourite colour is red.",
            "Tom's favourite colour is blue now."
        ),
        Relation::Changes(Attribute::Favourite)
    );
    assert_eq!(
        relation("小王住在北京", "小王现在住在上海"),
        Relation::Changes(Attribute::Residence)
    );
    assert_eq!(
        relation(
            "渡辺さんは大阪に住んでいる。",
            "渡辺さんは名古屋に住んでいる。"
        ),
        Relation::Changes(Attribute::Residence)
    );
    assert_eq!(
        relation(
            "Annas Lieblingsfarbe ist Rot.",
            "Annas Lieblingsfarbe ist jetzt Blau."
        ),
        Relation::Changes(Attribute::Favourite)
    );
    assert_eq!(
        relation("Анна живёт в Москве.", "Анна теперь живет в Казани."),
        Relation::Changes(Attribute::Residence)
    );
    assert_eq!(
        relation("ユーザーは三十歳だ。", "ユーザーは三十一歳だ。"),
        Relation::Changes(Attribute::Age)
    );
    assert_ne!(
        relation("用户今年三十岁。", "用户今年三十一岁。"),
        Relation::Refines {
            new_is_fuller: true
        }
    );
}

#[test]
fn another_person_or_a_many_valued_attribute_is_another_fact() {
    assert_eq!(
        relation("Li的妹妹住在北京。", "Li的哥哥住在广州。"),
        Relation::Differs
    );
    assert_eq!(
        relation("Li's sister lives in Lyon.", "Li's brother lives in Lyon."),
        Relation::Differs
    );
    assert_eq!(relation("小王住在北京", "小李住在北京"), Relation::Differs);
    assert_eq!(
        relation(
            "リーの妹は北京に住んでいる。",
            "リーの兄は北京に住んでいる。"
        ),
        Relation::Differs
    );
    assert_eq!(
        relation("Li喜欢喝绿茶。", "Li喜欢喝咖啡。"),
        Relation::Differs
    );
    assert_eq!(
        relation("Li每周六去游泳。", "Li喜欢喝绿茶。"),
        Relation::Differs
    );
    assert_eq!(
        relation("Ana plays tennis.", "Ana plays chess."),
        Relation::Differs
    );
}

#[test]
fn the_same_statement_negated_negates() {
    assert_eq!(
        relation("Ana eats meat.", "Ana no longer eats meat."),
        Relation::Negates
    );
    assert_eq!(
        relation("Ann likes coffee", "Ann doesn't like coffee anymore"),
        Relation::Negates
    );
    assert_eq!(
        relation("小王吃肉。", "小王不再吃肉了。"),
        Relation::Negates
    );
    assert_eq!(
        relation("田中さんは肉を食べる。", "田中さんはもう肉を食べない。"),
        Relation::Negates
    );
    assert_eq!(
        relation("Ольга ест мясо.", "Ольга больше не ест мясо."),
        Relation::Negates
    );
    assert_eq!(
        relation("Ana eats meat.", "Ana's son no longer eats meat."),
        Relation::Differs
    );
}

#[test]
fn agreement_is_the_share_of_content_units() {
    let a = Reading::new("Li lives in Beijing");
    assert!((a.agreement(&a) - 1.0).abs() < 1e-6);
    let b = Reading::new("Li lives in Chaoyang, Beijing");
    assert!(
        (a.agreement(&b) - 6.0 / 7.0).abs() < 1e-6,
        "{}",
        a.agreement(&b)
    );
    let c = Reading::new("Ana plays chess");
    assert_eq!(a.agreement(&c), 0.0);
}

#[test]
fn elisions_and_apostrophes_read_as_words() {
    assert_eq!(words("l'utilisateur"), vec!["l", "utilisateur"]);
    assert_eq!(words("doesn't"), vec!["doesnt"]);
    assert_eq!(words("tom's"), vec!["toms"]);
}
