//! The words a frame comparison needs, for the languages hindsight reads:
//! English, Chinese, Japanese, Russian, Spanish, German and French. Word
//! entries are whole lowercase words; `_STEMS` entries match a word's start;
//! `_MARKS` entries are runs of CJK characters matched inside the text.
//! Words are compared as [`super::Reading`] folds them: lowercase, ё as е.

/// Words that carry no content of their own: articles, particles,
/// prepositions, auxiliaries, possessives, intensifiers, and the words that
/// say "this changed" ("now", "anymore") without being what changed.
#[rustfmt::skip]
pub const FUNCTION_WORDS: &[&str] = &[
    // English
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "am", "to", "of", "in", "on", "at",
    "and", "s", "has", "have", "had", "with", "for", "it", "that", "this", "his", "her", "their",
    "its", "as", "by", "very", "really", "so", "from", "into", "does", "do", "did", "now",
    "currently", "anymore", "nowadays", "lately", "actually", "instead", "again", "these", "days",
    "still", "also", "too", "any", "more", "longer", "user", "users",
    // Spanish
    "el", "la", "los", "las", "un", "una", "unos", "unas", "de", "del", "al", "en", "y", "e", "que",
    "es", "son", "está", "están", "se", "su", "sus", "muy", "ahora", "actualmente", "ya", "más",
    "también", "todavía", "usuario", "usuaria", "por", "con", "para", "lo",
    // German
    "der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "ist",
    "sind", "war", "und", "im", "am", "zu", "zum", "zur", "mit", "von", "vom", "sehr", "sein",
    "seine", "seinen", "seinem", "ihr", "ihre", "ihren", "ihrem", "jetzt", "inzwischen",
    "mittlerweile", "nun", "derzeit", "mehr", "auch", "noch", "nutzer", "nutzerin", "hat", "bei",
    "beim", "auf", "aus", "nach",
    // French
    "le", "les", "l", "une", "des", "du", "d", "au", "aux", "et", "est", "sont", "à", "sa", "son",
    "ses", "leur", "leurs", "très", "qu", "s", "maintenant", "désormais", "actuellement", "aussi",
    "encore", "utilisateur", "utilisatrice", "dans", "avec", "pour", "chez", "c", "j", "m", "t",
    // Russian
    "в", "во", "на", "и", "с", "со", "у", "к", "по", "о", "об", "его", "ее", "их", "это", "очень",
    "теперь", "сейчас", "уже", "тоже", "также", "еще", "пользователь", "пользователя",
    "пользователю", "—",
];

/// Words that negate what they stand in ("Ana no longer eats meat").
#[rustfmt::skip]
pub const NEGATION_WORDS: &[&str] = &[
    "not", "no", "never", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "wont", "cant",
    "cannot", "nunca", "nicht", "kein", "keine", "keinen", "keinem", "nie", "niemals", "ne", "pas",
    "plus", "jamais", "не", "нет", "никогда", "больше",
];

/// CJK runs that negate: Chinese 不, 没, 别 (不再, 没有); Japanese verb
/// endings in -ない, -ません, -なかった.
#[rustfmt::skip]
pub const NEGATION_MARKS: &[&str] = &["不", "没", "别", "ない", "ません", "なかった"];

/// CJK runs that say "this changed" without being what changed.
#[rustfmt::skip]
pub const CHANGE_MARKS: &[&str] = &[
    "现在", "目前", "如今", "已经", "不再", "一直", "今は", "現在は", "いまは", "最近は", "もう",
];

/// CJK characters that, alone, carry no content (particles, the copula).
#[rustfmt::skip]
pub const FUNCTION_CHARS: &[char] = &[
    '的', '了', '是', '在', '很', '也', '都', '还', '和', '吗', '呢', '吧', '啊', '着', '过',
    'は', 'が', 'を', 'に', 'で', 'の', 'へ', 'と', 'も', 'や', 'か', 'ね', 'よ', 'す', 'ま',
    'だ', 'た', 'る', 'い', 'て', '。', '、',
];

/// Japanese and Korean particles that close the subject: what comes before
/// them is who the statement is about.
#[rustfmt::skip]
pub const SUBJECT_PARTICLES: &[char] = &['は', 'が'];

/// An attribute that holds one value at a time: a new value replaces the old.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute {
    Residence,
    Work,
    Favourite,
    Partner,
    Age,
    Contact,
    Name,
    Manager,
}

/// Each attribute's word stems (matched at a word's start, lowercase) and
/// CJK marks (matched inside the text).
#[rustfmt::skip]
pub const ATTRIBUTES: &[(Attribute, &[&str], &[&str])] = &[
    (
        Attribute::Residence,
        &[
            "lives", "live", "living", "based", "moved", "resides", "vive", "vivía", "reside",
            "mudó", "mudado", "wohnt", "wohnte", "lebt", "gezogen", "zog", "habite", "vit",
            "déménagé", "живет", "жил", "живут", "переехал", "проживает",
        ],
        &[
            "住在", "家在", "搬到", "搬去", "定居", "住んで", "住む", "引っ越", "在住",
        ],
    ),
    (
        Attribute::Work,
        &[
            "works", "work", "working", "job", "employed", "employer", "trabaja", "trabajo",
            "arbeitet", "beruf", "arbeitgeber", "travaille", "métier", "emploi", "работает",
            "работа", "профессия",
        ],
        &[
            "工作", "上班", "任职", "职业", "働いて", "勤めて", "勤務", "職業", "仕事",
        ],
    ),
    (
        Attribute::Favourite,
        &[
            "favourite", "favorite", "prefer", "prefers", "preferred", "favorit", "favorita",
            "preferido", "preferida", "lieblings", "préféré", "préférée", "favori", "любим",
        ],
        &["最喜欢", "最爱", "一番好き", "好きな", "お気に入り"],
    ),
    (
        Attribute::Partner,
        &[
            "married", "wife", "husband", "partner", "girlfriend", "boyfriend", "casado", "casada",
            "esposa", "esposo", "novia", "novio", "verheiratet", "frau", "mann", "freundin",
            "freund", "marié", "mariée", "épouse", "mari", "femme", "copine", "copain", "женат",
            "замужем", "жена", "муж", "девушка",
        ],
        &[
            "结婚", "妻子", "丈夫", "女朋友", "男朋友", "結婚", "妻", "夫", "彼女", "彼氏",
        ],
    ),
    (
        Attribute::Age,
        &["age", "aged", "edad", "alter", "âge", "возраст"],
        &["岁", "歳", "年龄", "年齢"],
    ),
    (
        Attribute::Contact,
        &[
            "phone", "email", "address", "teléfono", "correo", "dirección", "telefon", "handy",
            "adresse", "téléphone", "portable", "courriel", "телефон", "почта", "адрес",
        ],
        &[
            "电话", "手机", "邮箱", "地址", "電話", "携帯", "メール", "住所",
        ],
    ),
    (
        Attribute::Name,
        &[
            "name", "named", "called", "llama", "nombre", "heißt", "appelle", "nom", "зовут",
            "называется", "имя",
        ],
        &["叫", "名字", "名前", "という"],
    ),
    (
        Attribute::Manager,
        &[
            "manager", "boss", "supervisor", "jefe", "jefa", "chef", "chefin", "vorgesetzte",
            "vorgesetzter", "patron", "patronne", "начальник", "руководитель",
        ],
        &["上司", "领导", "老板", "经理", "主管"],
    ),
];

/// Words for a person by their tie to someone: a differing one means the
/// statements are about different people ("Li's sister" / "Li's brother").
#[rustfmt::skip]
pub const PERSON_WORDS: &[&str] = &[
    // English
    "sister", "brother", "mother", "mom", "mum", "father", "dad", "wife", "husband", "son",
    "daughter", "friend", "colleague", "boss", "manager", "partner", "girlfriend", "boyfriend",
    "cousin", "uncle", "aunt", "grandmother", "grandfather", "grandma", "grandpa", "neighbour",
    "neighbor", "roommate", "child", "children", "kid", "parents", "parent", "sibling",
    // Spanish
    "hermana", "hermano", "madre", "mamá", "padre", "papá", "esposa", "esposo", "mujer", "marido",
    "hijo", "hija", "amigo", "amiga", "colega", "jefe", "jefa", "novia", "novio", "primo", "prima",
    "tío", "tía", "abuela", "abuelo", "vecino", "vecina", "padres",
    // German
    "schwester", "bruder", "mutter", "mama", "vater", "papa", "frau", "mann", "ehefrau", "ehemann",
    "sohn", "tochter", "freund", "freundin", "kollege", "kollegin", "chef", "chefin", "cousin",
    "cousine", "onkel", "tante", "oma", "opa", "nachbar", "nachbarin", "eltern",
    // French
    "sœur", "soeur", "frère", "frere", "mère", "père", "femme", "mari", "fils", "fille", "ami",
    "amie", "collègue", "patron", "patronne", "copine", "copain", "cousine", "oncle", "tante",
    "grand", "voisin", "voisine", "parents",
    // Russian
    "сестра", "сестры", "сестре", "брат", "брата", "брату", "мать", "матери", "мама", "мамы",
    "отец", "отца", "папа", "папы", "жена", "жены", "муж", "мужа", "сын", "сына", "дочь", "дочери",
    "друг", "друга", "подруга", "подруги", "коллега", "коллеги", "начальник", "начальника",
    "бабушка", "бабушки", "дедушка", "дедушки", "сосед", "соседа", "родители",
];

/// The same in Chinese and Japanese, matched inside the text.
#[rustfmt::skip]
pub const PERSON_MARKS: &[&str] = &[
    "妹", "哥", "姐", "弟", "母亲", "妈", "父亲", "爸", "妻", "丈夫", "老公", "老婆", "儿子",
    "女儿", "朋友", "同事", "老板", "经理", "表", "堂", "叔", "姨", "舅", "奶奶", "爷爷", "外婆",
    "外公", "邻居", "室友", "孩子", "父母", "兄", "姉", "母", "父", "夫", "息子", "娘", "友達",
    "友人", "同僚", "上司", "祖母", "祖父", "隣", "子供", "両親", "彼女", "彼氏",
];
