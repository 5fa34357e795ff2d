#include "examples/data/toy_grammar.h"

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace data {

namespace {

// ---- lexicon --------------------------------------------------------------------------------

// What a noun is. Exactly one "kind" bit per noun (adjectives choose by kind), plus any number
// of "can be ..." bits (verbs choose their objects by kind or by these).
enum : unsigned {
    HUM = 1u << 0,      // kinds: person
    ANI = 1u << 1,      //        animal
    FOOD = 1u << 2,
    TEXT = 1u << 3,     //        something to read
    THING = 1u << 4,    //        small object
    VEH = 1u << 5,      //        vehicle
    WEAR = 1u << 6,     //        clothing
    FURN = 1u << 7,     //        furniture, doors and windows
    BLDG = 1u << 8,     //        building, bridge
    PLACE = 1u << 9,    //        city
    SONG = 1u << 10,
    GAME = 1u << 11,
    OPEN = 1u << 12,    // can be ... opened
    BREAK = 1u << 13,   //            broken (glass)
    DRIVE = 1u << 14,   //            driven
    BUILD = 1u << 15,   //            built
    GOODS = 1u << 16,   //            bought and sold
    TOSS = 1u << 17,    //            thrown and caught
};
constexpr unsigned ALL_KINDS = HUM | ANI | FOOD | TEXT | THING | VEH | WEAR | FURN | BLDG | PLACE | SONG | GAME;

enum Gender { MASC, FEM, NEUT };

struct Noun {
    const char* en_sg;
    const char* en_pl;
    Gender gender;
    const char* de_sg;  // capitalized, as German nouns are
    const char* de_pl;
    unsigned flags;
};

// No weak masculine nouns (der Junge -> den Jungen), no English nouns with an identical plural
// (sheep, fish): each English sentence must have exactly one German translation.
const Noun kNouns[] = {
    // masculine: der / den / ein / einen
    {"man", "men", MASC, "Mann", "Männer", HUM},
    {"father", "fathers", MASC, "Vater", "Väter", HUM},
    {"brother", "brothers", MASC, "Bruder", "Brüder", HUM},
    {"son", "sons", MASC, "Sohn", "Söhne", HUM},
    {"uncle", "uncles", MASC, "Onkel", "Onkel", HUM},
    {"teacher", "teachers", MASC, "Lehrer", "Lehrer", HUM},
    {"friend", "friends", MASC, "Freund", "Freunde", HUM},
    {"doctor", "doctors", MASC, "Arzt", "Ärzte", HUM},
    {"king", "kings", MASC, "König", "Könige", HUM},
    {"dog", "dogs", MASC, "Hund", "Hunde", ANI},
    {"bird", "birds", MASC, "Vogel", "Vögel", ANI},
    {"fox", "foxes", MASC, "Fuchs", "Füchse", ANI},
    {"frog", "frogs", MASC, "Frosch", "Frösche", ANI},
    {"apple", "apples", MASC, "Apfel", "Äpfel", FOOD | GOODS | TOSS},
    {"cake", "cakes", MASC, "Kuchen", "Kuchen", FOOD | GOODS},
    {"letter", "letters", MASC, "Brief", "Briefe", TEXT | OPEN},
    {"ball", "balls", MASC, "Ball", "Bälle", THING | GOODS | TOSS},
    {"key", "keys", MASC, "Schlüssel", "Schlüssel", THING | GOODS | TOSS},
    {"plate", "plates", MASC, "Teller", "Teller", THING | BREAK | GOODS},
    {"pencil", "pencils", MASC, "Bleistift", "Bleistifte", THING | GOODS | TOSS},
    {"suitcase", "suitcases", MASC, "Koffer", "Koffer", THING | OPEN | GOODS},
    {"computer", "computers", MASC, "Computer", "Computer", THING | GOODS},
    {"umbrella", "umbrellas", MASC, "Regenschirm", "Regenschirme", THING | OPEN | GOODS},
    {"hat", "hats", MASC, "Hut", "Hüte", WEAR | GOODS | TOSS},
    {"shoe", "shoes", MASC, "Schuh", "Schuhe", WEAR | GOODS | TOSS},
    {"train", "trains", MASC, "Zug", "Züge", VEH | DRIVE},
    {"bus", "buses", MASC, "Bus", "Busse", VEH | DRIVE | GOODS},
    {"tractor", "tractors", MASC, "Traktor", "Traktoren", VEH | DRIVE | GOODS},
    {"table", "tables", MASC, "Tisch", "Tische", FURN | BUILD | GOODS},
    {"chair", "chairs", MASC, "Stuhl", "Stühle", FURN | BUILD | GOODS},
    // feminine: die / die / eine / eine
    {"woman", "women", FEM, "Frau", "Frauen", HUM},
    {"mother", "mothers", FEM, "Mutter", "Mütter", HUM},
    {"sister", "sisters", FEM, "Schwester", "Schwestern", HUM},
    {"daughter", "daughters", FEM, "Tochter", "Töchter", HUM},
    {"aunt", "aunts", FEM, "Tante", "Tanten", HUM},
    {"queen", "queens", FEM, "Königin", "Königinnen", HUM},
    {"cat", "cats", FEM, "Katze", "Katzen", ANI},
    {"mouse", "mice", FEM, "Maus", "Mäuse", ANI},
    {"cow", "cows", FEM, "Kuh", "Kühe", ANI},
    {"duck", "ducks", FEM, "Ente", "Enten", ANI},
    {"banana", "bananas", FEM, "Banane", "Bananen", FOOD | GOODS | TOSS},
    {"pear", "pears", FEM, "Birne", "Birnen", FOOD | GOODS | TOSS},
    {"tomato", "tomatoes", FEM, "Tomate", "Tomaten", FOOD | GOODS | TOSS},
    {"potato", "potatoes", FEM, "Kartoffel", "Kartoffeln", FOOD | GOODS | TOSS},
    {"soup", "soups", FEM, "Suppe", "Suppen", FOOD},
    {"newspaper", "newspapers", FEM, "Zeitung", "Zeitungen", TEXT | GOODS},
    {"story", "stories", FEM, "Geschichte", "Geschichten", TEXT},
    {"map", "maps", FEM, "Karte", "Karten", TEXT | GOODS},
    {"flower", "flowers", FEM, "Blume", "Blumen", THING | GOODS},
    {"lamp", "lamps", FEM, "Lampe", "Lampen", THING | GOODS},
    {"bag", "bags", FEM, "Tasche", "Taschen", THING | OPEN | GOODS},
    {"box", "boxes", FEM, "Kiste", "Kisten", THING | OPEN | BUILD | GOODS},
    {"clock", "clocks", FEM, "Uhr", "Uhren", THING | GOODS},
    {"cup", "cups", FEM, "Tasse", "Tassen", THING | BREAK | GOODS},
    {"bottle", "bottles", FEM, "Flasche", "Flaschen", THING | OPEN | BREAK | GOODS},
    {"jacket", "jackets", FEM, "Jacke", "Jacken", WEAR | GOODS},
    {"door", "doors", FEM, "Tür", "Türen", FURN | OPEN},
    {"bridge", "bridges", FEM, "Brücke", "Brücken", BLDG | BUILD},
    {"city", "cities", FEM, "Stadt", "Städte", PLACE},
    // neuter: das / das / ein / ein
    {"child", "children", NEUT, "Kind", "Kinder", HUM},
    {"girl", "girls", NEUT, "Mädchen", "Mädchen", HUM},
    {"baby", "babies", NEUT, "Baby", "Babys", HUM},
    {"horse", "horses", NEUT, "Pferd", "Pferde", ANI},
    {"pig", "pigs", NEUT, "Schwein", "Schweine", ANI},
    {"rabbit", "rabbits", NEUT, "Kaninchen", "Kaninchen", ANI},
    {"chicken", "chickens", NEUT, "Huhn", "Hühner", ANI},
    {"egg", "eggs", NEUT, "Ei", "Eier", FOOD | GOODS | TOSS},
    {"book", "books", NEUT, "Buch", "Bücher", TEXT | OPEN | GOODS},
    {"notebook", "notebooks", NEUT, "Heft", "Hefte", TEXT | GOODS},
    {"picture", "pictures", NEUT, "Bild", "Bilder", THING | GOODS},
    {"glass", "glasses", NEUT, "Glas", "Gläser", THING | BREAK | GOODS},
    {"gift", "gifts", NEUT, "Geschenk", "Geschenke", THING | OPEN},
    {"knife", "knives", NEUT, "Messer", "Messer", THING | GOODS},
    {"phone", "phones", NEUT, "Telefon", "Telefone", THING | GOODS},
    {"shirt", "shirts", NEUT, "Hemd", "Hemden", WEAR | GOODS},
    {"dress", "dresses", NEUT, "Kleid", "Kleider", WEAR | GOODS},
    {"car", "cars", NEUT, "Auto", "Autos", VEH | DRIVE | GOODS},
    {"bicycle", "bicycles", NEUT, "Fahrrad", "Fahrräder", VEH | GOODS},
    {"boat", "boats", NEUT, "Boot", "Boote", VEH | BUILD | GOODS},
    {"ship", "ships", NEUT, "Schiff", "Schiffe", VEH | BUILD},
    {"bed", "beds", NEUT, "Bett", "Betten", FURN | BUILD | GOODS},
    {"window", "windows", NEUT, "Fenster", "Fenster", FURN | OPEN | BREAK},
    {"house", "houses", NEUT, "Haus", "Häuser", BLDG | BUILD | GOODS},
    {"song", "songs", NEUT, "Lied", "Lieder", SONG},
    {"game", "games", NEUT, "Spiel", "Spiele", GAME | GOODS},
};

struct Adjective {
    const char* en;
    const char* de_stem;  // the form endings attach to: "groß", "dunkl" (dunkel), "teur" (teuer)
    unsigned kinds;       // nouns it may describe
};

const Adjective kAdjectives[] = {
    {"big", "groß", ALL_KINDS & ~(SONG | GAME)},
    {"small", "klein", ALL_KINDS & ~(SONG | GAME)},
    {"old", "alt", ALL_KINDS & ~FOOD},
    {"new", "neu", ALL_KINDS & ~(HUM | ANI | FOOD)},
    {"young", "jung", HUM | ANI},
    {"beautiful", "schön", ALL_KINDS & ~FOOD},
    {"red", "rot", THING | VEH | WEAR | FURN | BLDG},
    {"blue", "blau", THING | VEH | WEAR | FURN | BLDG},
    {"green", "grün", THING | VEH | WEAR | FURN | BLDG},
    {"yellow", "gelb", THING | VEH | WEAR | FURN | BLDG},
    {"black", "schwarz", ANI | THING | VEH | WEAR | FURN | BLDG},
    {"fast", "schnell", ANI | VEH},
    {"slow", "langsam", ANI | VEH},
    {"hungry", "hungrig", HUM | ANI},
    {"tired", "müde", HUM | ANI},
    {"lazy", "faul", HUM | ANI},
    {"brave", "mutig", HUM | ANI},
    {"clever", "klug", HUM | ANI},
    {"friendly", "freundlich", HUM | ANI},
    {"funny", "lustig", HUM | ANI | TEXT | SONG | GAME},
    {"famous", "berühmt", HUM | SONG | TEXT | PLACE | BLDG},
    {"fresh", "frisch", FOOD},
    {"sweet", "süß", FOOD},
    {"tasty", "lecker", FOOD},
    {"warm", "warm", FOOD},
    {"cold", "kalt", FOOD},
    {"expensive", "teur", THING | VEH | WEAR | FURN | BLDG | TEXT | GAME},
    {"cheap", "billig", THING | VEH | WEAR | FURN | TEXT | GAME},
    {"dark", "dunkl", WEAR | FURN | BLDG | PLACE},
    {"long", "lang", TEXT | SONG | GAME},
    {"heavy", "schwer", THING | FURN},
    {"dirty", "schmutzig", HUM | ANI | THING | VEH | WEAR | FURN | BLDG},
    {"clean", "sauber", HUM | ANI | THING | VEH | WEAR | FURN | BLDG},
};

// Present tense, by subject: ich, du, er/sie/es, wir/sie (plural). The "ihr" form is not needed:
// English "you" is always translated as "du".
struct GermanForms {
    const char* ich;
    const char* du;
    const char* er;
    const char* plural;
};

struct Verb {
    const char* en_base;    // "see", "look for"
    const char* en_3sg;     // "sees", "looks for"
    GermanForms de;
    unsigned subjects;      // HUM and/or ANI
    unsigned objects;       // noun flags it accepts as object
    GermanForms de_animal;  // used when the subject is an animal (essen -> fressen); ich == nullptr: none
};

constexpr GermanForms kNone = {nullptr, nullptr, nullptr, nullptr};
constexpr unsigned kPortable = FOOD | TEXT | THING;

const Verb kVerbs[] = {
    {"see", "sees", {"sehe", "siehst", "sieht", "sehen"}, HUM | ANI, ALL_KINDS, kNone},
    {"have", "has", {"habe", "hast", "hat", "haben"}, HUM | ANI, ALL_KINDS & ~(PLACE | SONG), kNone},
    {"like", "likes", {"mag", "magst", "mag", "mögen"}, HUM | ANI, ALL_KINDS, kNone},
    {"eat", "eats", {"esse", "isst", "isst", "essen"}, HUM | ANI, FOOD, {"fresse", "frisst", "frisst", "fressen"}},
    {"read", "reads", {"lese", "liest", "liest", "lesen"}, HUM, TEXT, kNone},
    {"buy", "buys", {"kaufe", "kaufst", "kauft", "kaufen"}, HUM, GOODS, kNone},
    {"sell", "sells", {"verkaufe", "verkaufst", "verkauft", "verkaufen"}, HUM, GOODS, kNone},
    {"look for", "looks for", {"suche", "suchst", "sucht", "suchen"}, HUM | ANI, HUM | ANI | kPortable | VEH | WEAR | GAME, kNone},
    {"find", "finds", {"finde", "findest", "findet", "finden"}, HUM | ANI, HUM | ANI | kPortable | VEH | WEAR | GAME, kNone},
    {"need", "needs", {"brauche", "brauchst", "braucht", "brauchen"}, HUM | ANI, HUM | GOODS, kNone},
    {"draw", "draws", {"zeichne", "zeichnest", "zeichnet", "zeichnen"}, HUM, ALL_KINDS & ~(SONG | GAME), kNone},
    {"carry", "carries", {"trage", "trägst", "trägt", "tragen"}, HUM | ANI, kPortable | WEAR, kNone},
    {"hold", "holds", {"halte", "hältst", "hält", "halten"}, HUM, kPortable, kNone},
    {"take", "takes", {"nehme", "nimmst", "nimmt", "nehmen"}, HUM, kPortable | WEAR, kNone},
    {"bring", "brings", {"bringe", "bringst", "bringt", "bringen"}, HUM | ANI, kPortable | WEAR, kNone},
    {"wash", "washes", {"wasche", "wäschst", "wäscht", "waschen"}, HUM, HUM | ANI | FOOD | VEH | WEAR | BREAK, kNone},
    {"meet", "meets", {"treffe", "triffst", "trifft", "treffen"}, HUM, HUM, kNone},
    {"hear", "hears", {"höre", "hörst", "hört", "hören"}, HUM | ANI, HUM | ANI | SONG | VEH, kNone},
    {"know", "knows", {"kenne", "kennst", "kennt", "kennen"}, HUM | ANI, HUM | ANI | TEXT | SONG | PLACE | BLDG | GAME, kNone},
    {"love", "loves", {"liebe", "liebst", "liebt", "lieben"}, HUM | ANI, HUM | ANI | FOOD | TEXT | SONG | GAME | PLACE, kNone},
    {"visit", "visits", {"besuche", "besuchst", "besucht", "besuchen"}, HUM, HUM | PLACE | BLDG, kNone},
    {"call", "calls", {"rufe", "rufst", "ruft", "rufen"}, HUM, HUM | ANI, kNone},
    {"feed", "feeds", {"füttere", "fütterst", "füttert", "füttern"}, HUM, ANI, kNone},
    {"catch", "catches", {"fange", "fängst", "fängt", "fangen"}, HUM | ANI, ANI | TOSS, kNone},
    {"throw", "throws", {"werfe", "wirfst", "wirft", "werfen"}, HUM, TOSS, kNone},
    {"open", "opens", {"öffne", "öffnest", "öffnet", "öffnen"}, HUM, OPEN, kNone},
    {"break", "breaks", {"zerbreche", "zerbrichst", "zerbricht", "zerbrechen"}, HUM | ANI, BREAK, kNone},
    {"steal", "steals", {"stehle", "stiehlst", "stiehlt", "stehlen"}, HUM | ANI, kPortable | VEH | WEAR, kNone},
    {"cook", "cooks", {"koche", "kochst", "kocht", "kochen"}, HUM, FOOD, kNone},
    {"build", "builds", {"baue", "baust", "baut", "bauen"}, HUM, BUILD, kNone},
    {"drive", "drives", {"fahre", "fährst", "fährt", "fahren"}, HUM, DRIVE, kNone},
    {"forget", "forgets", {"vergesse", "vergisst", "vergisst", "vergessen"}, HUM, HUM | TEXT | THING | SONG | WEAR | GAME, kNone},
    {"write", "writes", {"schreibe", "schreibst", "schreibt", "schreiben"}, HUM, TEXT | SONG, kNone},
    {"sing", "sings", {"singe", "singst", "singt", "singen"}, HUM, SONG, kNone},
};

// Verbs that take a "that" clause: i know that ... -> ich weiß , dass ...
struct MatrixVerb {
    const char* en_base;
    const char* en_3sg;
    GermanForms de;
};

const MatrixVerb kMatrixVerbs[] = {
    {"know", "knows", {"weiß", "weißt", "weiß", "wissen"}},
    {"think", "thinks", {"denke", "denkst", "denkt", "denken"}},
    {"say", "says", {"sage", "sagst", "sagt", "sagen"}},
    {"hope", "hopes", {"hoffe", "hoffst", "hofft", "hoffen"}},
    {"believe", "believes", {"glaube", "glaubst", "glaubt", "glauben"}},
};

// Grammatical person, enough to choose a verb form in both languages.
enum Person { P1SG, P2SG, P3SG, P1PL, P3PL };

struct Pronoun {
    const char* en_subj;
    const char* en_obj;
    const char* de_nom;
    const char* de_acc;
    Person person;
};

const Pronoun kPronouns[] = {
    {"i", "me", "ich", "mich", P1SG},   {"you", "you", "du", "dich", P2SG}, {"he", "him", "er", "ihn", P3SG},
    {"she", "her", "sie", "sie", P3SG}, {"we", "us", "wir", "uns", P1PL},   {"they", "them", "sie", "sie", P3PL},
};

struct Possessive {
    const char* en;
    const char* de_stem;  // declines like "ein": mein, meine, meinen
};

const Possessive kPossessives[] = {
    {"my", "mein"}, {"your", "dein"}, {"his", "sein"}, {"her", "ihr"}, {"our", "unser"},
};

template <class T, size_t N>
constexpr size_t count_of(const T (&)[N]) { return N; }

// ---- German declension ----------------------------------------------------------------------
//
// Tables are indexed [case][slot]: case 0 nominative, 1 accusative; slot 0 masculine, 1 feminine,
// 2 neuter, 3 plural (any gender).

enum Case { NOM, ACC };

const char* const kDefiniteArticle[2][4] = {{"der", "die", "das", "die"}, {"den", "die", "das", "die"}};
// endings of ein / kein / mein ...: ein, eine, ein, (keine); einen, eine, ein, (keine)
const char* const kEinEnding[2][4] = {{"", "e", "", "e"}, {"en", "e", "", "e"}};
// adjective after der/die/das ("weak"): der große Hund, den großen Hund, die großen Hunde
const char* const kAdjAfterDer[2][4] = {{"e", "e", "e", "en"}, {"en", "e", "e", "en"}};
// adjective after ein/kein/mein ("mixed"): ein großer Hund, ein rotes Auto, keine großen Hunde
const char* const kAdjAfterEin[2][4] = {{"er", "e", "es", "en"}, {"en", "e", "es", "en"}};
// adjective with no article (only bare plurals here, "strong"): große Hunde
const char* const kAdjNoArticle = "e";

std::string inflect_adjective(const char* stem, const char* ending) {
    std::string s = stem;
    // müde + e -> müde, müde + en -> müden: a stem ending in e absorbs the ending's e
    if (!s.empty() && s.back() == 'e' && ending[0] == 'e') return s + (ending + 1);
    return s + ending;
}

// ---- sentence structure ---------------------------------------------------------------------

enum class Det { Definite, Indefinite, Possessive };  // the / a (plural: no article) / my ...

struct NounPhrase {
    int pronoun = -1;  // index into kPronouns, or -1 for a noun phrase
    int noun = -1;
    bool plural = false;
    Det det = Det::Definite;
    int possessive = 0;
    int adjective = -1;  // -1: none

    Person person() const { return pronoun >= 0 ? kPronouns[pronoun].person : plural ? P3PL : P3SG; }
    bool is_animal() const { return pronoun < 0 && (kNouns[noun].flags & ANI); }
};

struct Clause {
    NounPhrase subject;
    int verb = 0;
    NounPhrase object;
    bool negated = false;
};

using Tokens = std::vector<std::string>;

void append_words(Tokens& out, const char* words) {  // "look for" -> "look", "for"
    std::istringstream in(words);
    for (std::string w; in >> w;) out.push_back(w);
}

// -- English

void english_np(Tokens& out, const NounPhrase& np, bool as_object) {
    if (np.pronoun >= 0) {
        out.push_back(as_object ? kPronouns[np.pronoun].en_obj : kPronouns[np.pronoun].en_subj);
        return;
    }
    const Noun& n = kNouns[np.noun];
    const std::string next = np.adjective >= 0 ? kAdjectives[np.adjective].en : n.en_sg;
    switch (np.det) {
    case Det::Definite: out.push_back("the"); break;
    case Det::Indefinite:
        if (!np.plural) out.push_back(std::string("aeiou").find(next[0]) != std::string::npos ? "an" : "a");
        break;
    case Det::Possessive: out.push_back(kPossessives[np.possessive].en); break;
    }
    if (np.adjective >= 0) out.push_back(kAdjectives[np.adjective].en);
    out.push_back(np.plural ? n.en_pl : n.en_sg);
}

// the dog sees the cat / the dog does not see the cat / does the dog see the cat
void english_clause(Tokens& out, const Clause& c, bool question) {
    const Verb& v = kVerbs[c.verb];
    const bool third_sg = c.subject.person() == P3SG;
    if (question) out.push_back(third_sg ? "does" : "do");
    english_np(out, c.subject, false);
    if (c.negated) {
        out.push_back(third_sg ? "does" : "do");
        out.push_back("not");
    }
    append_words(out, question || c.negated || !third_sg ? v.en_base : v.en_3sg);
    english_np(out, c.object, true);
}

// -- German

const char* german_verb(const GermanForms& f, Person p) {
    switch (p) {
    case P1SG: return f.ich;
    case P2SG: return f.du;
    case P3SG: return f.er;
    default: return f.plural;
    }
}

const char* german_verb(const Clause& c) {
    const Verb& v = kVerbs[c.verb];
    const bool animal_form = v.de_animal.ich != nullptr && c.subject.is_animal();
    return german_verb(animal_form ? v.de_animal : v.de, c.subject.person());
}

// `negate` turns an indefinite noun phrase into its "kein" form: einen Ball -> keinen Ball,
// Bälle -> keine Bälle.
void german_np(Tokens& out, const NounPhrase& np, Case cs, bool negate) {
    if (np.pronoun >= 0) {
        out.push_back(cs == NOM ? kPronouns[np.pronoun].de_nom : kPronouns[np.pronoun].de_acc);
        return;
    }
    const Noun& n = kNouns[np.noun];
    const int slot = np.plural ? 3 : n.gender;
    // the article: der/die/das, or a word that declines like "ein" (ein, kein, mein, ...), or
    // none (a bare plural: große Hunde). The adjective's ending depends on which.
    const bool definite = np.det == Det::Definite;
    const char* ein_stem = np.det == Det::Possessive ? kPossessives[np.possessive].de_stem
                           : definite                ? nullptr
                           : negate                  ? "kein"
                           : np.plural               ? nullptr
                                                     : "ein";
    if (definite) out.push_back(kDefiniteArticle[cs][slot]);
    if (ein_stem) out.push_back(std::string(ein_stem) + kEinEnding[cs][slot]);
    const char* adj_ending = definite ? kAdjAfterDer[cs][slot] : ein_stem ? kAdjAfterEin[cs][slot] : kAdjNoArticle;
    if (np.adjective >= 0) out.push_back(inflect_adjective(kAdjectives[np.adjective].de_stem, adj_ending));
    out.push_back(np.plural ? n.de_pl : n.de_sg);
}

// Object, with the negation where German puts it: "kein" inside an indefinite object, else
// "nicht" right after the object (before the verb in a subordinate clause).
void german_object(Tokens& out, const Clause& c) {
    const bool kein = c.negated && c.object.pronoun < 0 && c.object.det == Det::Indefinite;
    german_np(out, c.object, ACC, kein);
    if (c.negated && !kein) out.push_back("nicht");
}

enum class Order { Main, Question, Subordinate };

// Subject and object keep their order; the verb comes first (question), second (main clause)
// or last (subordinate clause).
void german_clause(Tokens& out, const Clause& c, Order order) {
    if (order == Order::Question) out.push_back(german_verb(c));
    german_np(out, c.subject, NOM, false);
    if (order == Order::Main) out.push_back(german_verb(c));
    german_object(out, c);
    if (order == Order::Subordinate) out.push_back(german_verb(c));
}

// ---- sampling -------------------------------------------------------------------------------

// Candidate lists, computed once, in lexicon order (so sampling is deterministic).
struct Tables {
    std::vector<std::vector<int>> subjects_of_verb, objects_of_verb, adjectives_of_noun;

    Tables() {
        for (const Verb& v : kVerbs) {
            std::vector<int> subj, obj;
            for (int n = 0; n < static_cast<int>(count_of(kNouns)); n++) {
                if (kNouns[n].flags & v.subjects) subj.push_back(n);
                if (kNouns[n].flags & v.objects) obj.push_back(n);
            }
            subjects_of_verb.push_back(subj);
            objects_of_verb.push_back(obj);
        }
        for (const Noun& n : kNouns) {
            std::vector<int> adj;
            for (int a = 0; a < static_cast<int>(count_of(kAdjectives)); a++)
                if (kAdjectives[a].kinds & n.flags) adj.push_back(a);
            adjectives_of_noun.push_back(adj);
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

template <class T>
T pick(autograd::Rng& rng, const std::vector<T>& v) { return v[rng.below(static_cast<uint32_t>(v.size()))]; }

bool chance(autograd::Rng& rng, unsigned percent) { return rng.below(100) < percent; }   // P = percent / 100

// A noun phrase headed by one of `nouns`. Percentages: how often plural, indefinite, possessive
// (the rest is definite), and how often an adjective is added.
NounPhrase sample_noun_phrase(autograd::Rng& rng, const std::vector<int>& nouns, unsigned plural_pct,
                              unsigned indef_pct, unsigned poss_pct, unsigned adj_pct, bool allow_bare_plural) {
    NounPhrase np;
    np.noun = pick(rng, nouns);
    np.plural = chance(rng, plural_pct);
    const unsigned r = static_cast<unsigned>(rng.below(100));
    np.det = r < indef_pct ? Det::Indefinite : r < indef_pct + poss_pct ? Det::Possessive : Det::Definite;
    if (np.det == Det::Indefinite && np.plural && !allow_bare_plural) np.det = Det::Definite;
    np.possessive = static_cast<int>(rng.below(count_of(kPossessives)));
    if (chance(rng, adj_pct)) {
        const std::vector<int>& adj = tables().adjectives_of_noun[np.noun];
        if (!adj.empty()) np.adjective = pick(rng, adj);
    }
    return np;
}

bool is_first_person(int pronoun) { return pronoun >= 0 && (kPronouns[pronoun].person == P1SG || kPronouns[pronoun].person == P1PL); }
bool is_second_person(int pronoun) { return pronoun >= 0 && kPronouns[pronoun].person == P2SG; }

Clause sample_clause(autograd::Rng& rng, bool negated) {
    const Tables& t = tables();
    Clause c;
    c.verb = static_cast<int>(rng.below(count_of(kVerbs)));
    c.negated = negated;
    const Verb& v = kVerbs[c.verb];

    // 1) subject: a pronoun (people only) or a noun phrase; no bare plural subjects
    if ((v.subjects & HUM) && chance(rng, 30))
        c.subject.pronoun = static_cast<int>(rng.below(count_of(kPronouns)));
    else
        c.subject = sample_noun_phrase(rng, t.subjects_of_verb[c.verb], 30, 20, 30, 30, false);

    // 2) object: a pronoun if the verb takes people, else a noun phrase; no "i see me", no
    //    "the dog sees the dog", no "the dog has me" (people after "have" only as nouns)
    const bool pronoun_objects = (v.objects & HUM) && std::string_view(v.en_base) != "have";
    for (;;) {
        if (pronoun_objects && chance(rng, 12)) {
            c.object = NounPhrase{};
            c.object.pronoun = static_cast<int>(rng.below(count_of(kPronouns)));
        } else {
            c.object = sample_noun_phrase(rng, t.objects_of_verb[c.verb], 30, 30, 25, 35, true);
        }
        const bool same_person = (is_first_person(c.subject.pronoun) && is_first_person(c.object.pronoun)) ||
                                 (is_second_person(c.subject.pronoun) && is_second_person(c.object.pronoun));
        const bool same_noun = c.subject.pronoun < 0 && c.object.pronoun < 0 && c.subject.noun == c.object.noun;
        if (!same_person && !same_noun) return c;
    }
}

std::string join(const Tokens& t) {
    std::string s;
    for (const std::string& w : t) {
        if (!s.empty()) s += ' ';
        s += w;
    }
    return s;
}

}  // namespace

Pair sample_toy_pair(autograd::Rng& rng) {
    Tokens en, de;
    const unsigned kind = static_cast<unsigned>(rng.below(100));
    const bool question = kind >= 45 && kind < 65;
    if (kind < 65) {
        // kind 0..44, a statement (negated from 25 on): the dog sees the cat . -> der Hund sieht die Katze .
        // kind 45..64, a yes/no question:      does the dog see the cat ? -> sieht der Hund die Katze ?
        const Clause c = sample_clause(rng, !question && kind >= 25);
        english_clause(en, c, question);
        german_clause(de, c, question ? Order::Question : Order::Main);
    } else {
        // kind 65..99, a that-clause (negated from 82 on): i know that the dog sees the ball .
        //                                               -> ich weiß , dass der Hund den Ball sieht .
        const Pronoun& p = kPronouns[rng.below(count_of(kPronouns))];
        const MatrixVerb& m = kMatrixVerbs[rng.below(count_of(kMatrixVerbs))];
        const Clause c = sample_clause(rng, kind >= 82);
        en = {p.en_subj, p.person == P3SG ? m.en_3sg : m.en_base, "that"};
        english_clause(en, c, false);
        de = {p.de_nom, german_verb(m.de, p.person), ",", "dass"};
        german_clause(de, c, Order::Subordinate);
    }
    en.push_back(question ? "?" : ".");
    de.push_back(question ? "?" : ".");
    return {join(en), join(de)};
}

ToyCorpus make_toy_corpus(uint64_t seed, size_t n_train, size_t n_valid, size_t n_test) {
    const size_t wanted = n_train + n_valid + n_test;
    autograd::Rng rng(seed);
    std::unordered_set<std::string> seen;  // English sources so far (membership only)
    ToyCorpus corpus;
    size_t attempts = 0;
    while (corpus.train.size() + corpus.valid.size() + corpus.test.size() < wanted) {
        if (++attempts > 20 * wanted + 1000)
            throw std::runtime_error("make_toy_corpus: cannot find " + std::to_string(wanted) +
                                     " distinct sentences; ask for fewer");
        Pair p = sample_toy_pair(rng);
        if (!seen.insert(p.src).second) continue;  // duplicate source: draw again
        std::vector<Pair>& dst = corpus.train.size() < n_train   ? corpus.train
                                 : corpus.valid.size() < n_valid ? corpus.valid
                                                                 : corpus.test;
        dst.push_back(std::move(p));
    }
    return corpus;
}

}  // namespace data
